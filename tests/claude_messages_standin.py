"""A local stand-in of Anthropic's Messages API for the real Claude Code CLI: streaming
(server-sent events, as the Messages API streams: message_start, content_block_start /
_delta / _stop, message_delta, message_stop) and plain JSON. Asked with the Bash tool
offered and no tool result yet, it asks for one Bash call (the command it is given);
once the tool's result comes back, or for any other request (a title, a summary), it
answers with a short text. It records every request."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ClaudeMessagesStandIn:
    def __init__(self, command: str, tool_use_id: str = "toolu_standin_01") -> None:
        self.command = command
        self.tool_use_id = tool_use_id
        self.requests: list[dict[str, Any]] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                standin.requests.append({"path": self.path, "body": body})
                path = self.path.split("?")[0]
                if path.endswith("/count_tokens"):
                    return self._json(200, {"input_tokens": 10})
                if not path.endswith("/v1/messages"):
                    return self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
                blocks, stop = standin.reply(body)
                if body.get("stream"):
                    return self._stream(body, blocks, stop)
                return self._json(200, standin.message(body, blocks, stop))

            def _json(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict, blocks: list[dict], stop: str) -> None:
                events: list[tuple[str, dict]] = [
                    ("message_start", {"type": "message_start", "message": standin.message(body, [], None)})
                ]
                for i, block in enumerate(blocks):
                    start: dict[str, Any]
                    delta: dict[str, Any]
                    if block["type"] == "text":
                        start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
                    else:
                        start = {**block, "input": {}}
                        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                    events += [
                        ("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}),
                        ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
                        ("content_block_stop", {"type": "content_block_stop", "index": i}),
                    ]
                events += [
                    (
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 12},
                        },
                    ),
                    ("message_stop", {"type": "message_stop"}),
                ]
                data = "".join(f"event: {name}\ndata: {json.dumps(payload)}\n\n" for name, payload in events).encode()
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
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def reply(self, body: dict) -> tuple[list[dict], str]:
        offered = {t.get("name") for t in body.get("tools") or []}
        last = (body.get("messages") or [{}])[-1]
        content = last.get("content") if isinstance(last.get("content"), list) else []
        answered = any(isinstance(c, dict) and c.get("type") == "tool_result" for c in content)
        if "Bash" in offered and not answered and not self.tool_results():
            call = {"command": self.command, "description": "Create the marker file"}
            return [{"type": "tool_use", "id": self.tool_use_id, "name": "Bash", "input": call}], "tool_use"
        return [{"type": "text", "text": "Done."}], "end_turn"

    def tool_results(self) -> list[dict]:
        """The tool results Claude Code sent back (what the tool printed, or why it did not run)."""
        out = []
        for r in self.requests:
            for m in r["body"].get("messages") or []:
                if isinstance(m.get("content"), list):
                    out += [c for c in m["content"] if isinstance(c, dict) and c.get("type") == "tool_result"]
        return out

    @staticmethod
    def message(body: dict, blocks: list[dict], stop: str | None) -> dict:
        return {
            "id": "msg_standin",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-standin"),
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
