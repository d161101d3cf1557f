"""A local stand-in of OpenAI's Responses API for the real Codex CLI: `POST /v1/responses`
answered as the API streams it (server-sent events: response.created, one
response.output_item.done per output item, response.completed). Asked with a shell tool
offered and no tool output yet, it asks for one shell call (the command it is given, with
the call id it is given); once the call's output comes back, or for any other request, it
answers with a short message. It records every request; `GET /v1/models` lists one model."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "gpt-standin"
# Codex's names for the shell tool, newest first: it offers one of them.
SHELL_TOOLS = ("exec_command", "shell_command", "shell", "local_shell")


class CodexResponsesStandIn:
    def __init__(self, command: str, call_id: str = "call_standin_01") -> None:
        self.command = command
        self.call_id = call_id
        self.requests: list[dict[str, Any]] = []
        self._count = 0
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.split("?")[0].endswith("/models"):
                    return self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
                self._json(404, {"error": {"message": f"not found: {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"unreadable": len(raw)}
                standin.requests.append({"path": self.path, "body": body})
                if not self.path.split("?")[0].endswith("/responses"):
                    return self._json(404, {"error": {"message": f"not found: {self.path}", "type": "not_found"}})
                self._stream(standin.reply(body))

            def _json(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, items: list[dict]) -> None:
                standin._count += 1
                rid = f"resp_standin_{standin._count}"
                response = {"id": rid, "object": "response", "status": "in_progress", "model": MODEL, "output": []}
                events: list[dict[str, Any]] = [{"type": "response.created", "response": response}]
                for i, item in enumerate(items):
                    events.append({"type": "response.output_item.added", "output_index": i, "item": item})
                    events.append({"type": "response.output_item.done", "output_index": i, "item": item})
                usage = {
                    "input_tokens": 10,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": 5,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 15,
                }
                done = {**response, "status": "completed", "output": items, "usage": usage}
                events.append({"type": "response.completed", "response": done})
                data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def shell_tool(self, body: dict) -> dict | None:
        offered = {self._name(t): t for t in body.get("tools") or [] if isinstance(t, dict)}
        for name in SHELL_TOOLS:
            if name in offered:
                return offered[name]
        return None

    @staticmethod
    def _name(tool: dict) -> str:
        return str(tool.get("name") or tool.get("type") or "")

    def reply(self, body: dict) -> list[dict]:
        tool = self.shell_tool(body)
        if tool is not None and not self.tool_outputs() and not self._asked_before():
            return [self._call(tool)]
        return [
            {
                "type": "message",
                "id": f"msg_standin_{self._count}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
            }
        ]

    def _asked_before(self) -> bool:
        return any(self._outputs_of(r["body"], "function_call") for r in self.requests[:-1])

    def _call(self, tool: dict) -> dict:
        name = self._name(tool)
        if name == "local_shell":
            return {
                "type": "local_shell_call",
                "id": "lsh_standin",
                "call_id": self.call_id,
                "status": "completed",
                "action": {"type": "exec", "command": ["bash", "-lc", self.command]},
            }
        params = (tool.get("parameters") or {}).get("properties") or {}
        if "cmd" in params:
            args: dict[str, Any] = {"cmd": self.command}
        elif name == "shell":
            args = {"command": ["bash", "-lc", self.command]}
        else:
            args = {"command": self.command}
        return {
            "type": "function_call",
            "id": "fc_standin",
            "call_id": self.call_id,
            "name": name,
            "arguments": json.dumps(args),
            "status": "completed",
        }

    @staticmethod
    def _outputs_of(body: dict, kind: str) -> list[dict]:
        return [i for i in body.get("input") or [] if isinstance(i, dict) and i.get("type") == kind]

    def tool_outputs(self) -> list[dict]:
        """The outputs of the shell call Codex sent back (what ran, or why it did not)."""
        out: list[dict] = []
        for r in self.requests:
            for kind in ("function_call_output", "local_shell_call_output", "custom_tool_call_output"):
                out += [i for i in self._outputs_of(r["body"], kind) if i.get("call_id") == self.call_id]
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
