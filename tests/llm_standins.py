"""Local HTTP stand-ins for the Anthropic Messages API and OpenAI Chat Completions,
speaking their wire formats, so the real `anthropic` and `openai` SDKs run in tests
without a key or network.

Each stand-in records every request (path, headers, JSON body) and answers from a
script: a list consumed in order, or a function of the request body. A script item is
a text (a normal reply), a `Reply` (text plus usage / stop reason) or a `Fail`
(an HTTP error in the provider's error format).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    text: str
    # Anthropic keys (input_tokens, cache_creation_input_tokens, cache_read_input_tokens,
    # output_tokens) or OpenAI keys (prompt_tokens, completion_tokens, cached_tokens).
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None
    # OpenAI Chat Completions: the tool calls the model asks for ({"id", "name", "arguments"}).
    tool_calls: list[dict] = field(default_factory=list)


@dataclass
class Fail:
    status: int
    type: str = "api_error"
    message: str = "failed"
    headers: dict[str, str] = field(default_factory=dict)


Script = list | Callable[[dict], "str | Reply | Fail"]


class _StandIn:
    path = ""

    def __init__(self, script: Script | None = None) -> None:
        self.requests: list[dict] = []
        self._script = script if script is not None else []
        self._lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                with standin._lock:
                    standin.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if self.path != standin.path:
                    return self._send(404, standin.error_body("not_found_error", f"no route {self.path}"), {})
                item = standin._next(body)
                if isinstance(item, Fail):
                    return self._send(item.status, standin.error_body(item.type, item.message), item.headers)
                reply = item if isinstance(item, Reply) else Reply(text=str(item))
                self._send(200, standin.success_body(body, reply), {})

            def _send(self, status, payload, headers):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.root = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def _next(self, body: dict):
        with self._lock:
            if callable(self._script):
                return self._script(body)
            if not self._script:
                return Fail(500, "api_error", "stand-in script exhausted")
            return self._script.pop(0)

    def push(self, *items) -> None:
        with self._lock:
            assert isinstance(self._script, list), "push() is for a scripted stand-in, not a function"
            self._script.extend(items)

    def bodies(self) -> list[dict]:
        return [r["body"] for r in self.requests]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # provider formats
    def error_body(self, etype: str, message: str) -> dict:
        raise NotImplementedError

    def success_body(self, request: dict, reply: Reply) -> dict:
        raise NotImplementedError


class AnthropicStandIn(_StandIn):
    """POST /v1/messages. Point the SDK at it with ANTHROPIC_BASE_URL = `self.root`."""

    path = "/v1/messages"

    def error_body(self, etype: str, message: str) -> dict:
        return {"type": "error", "error": {"type": etype, "message": message}, "request_id": "req_standin"}

    def success_body(self, request: dict, reply: Reply) -> dict:
        u = reply.usage
        return {
            "id": f"msg_standin_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", "unknown"),
            "content": [{"type": "text", "text": reply.text}],
            "stop_reason": reply.stop_reason or "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": u.get("input_tokens", 10),
                "cache_creation_input_tokens": u.get("cache_creation_input_tokens", 0),
                "cache_read_input_tokens": u.get("cache_read_input_tokens", 0),
                "output_tokens": u.get("output_tokens", 5),
            },
        }

    @staticmethod
    def system_of(body: dict) -> list[dict]:
        return body.get("system") or []

    @staticmethod
    def user_text(body: dict) -> str:
        content = body["messages"][-1]["content"]
        return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


class OpenAIChatStandIn(_StandIn):
    """POST /v1/chat/completions. Point the SDK at it with OPENAI_BASE_URL = `self.url`."""

    path = "/v1/chat/completions"

    @property
    def url(self) -> str:
        return self.root + "/v1"

    def error_body(self, etype: str, message: str) -> dict:
        return {"error": {"message": message, "type": etype, "param": None, "code": None}}

    def success_body(self, request: dict, reply: Reply) -> dict:
        u = reply.usage
        prompt, completion = u.get("prompt_tokens", 10), u.get("completion_tokens", 5)
        return {
            "id": f"chatcmpl-standin{len(self.requests)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": request.get("model", "unknown"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.text or None, "refusal": None}
                    | ({"tool_calls": [self.tool_call(c) for c in reply.tool_calls]} if reply.tool_calls else {}),
                    "logprobs": None,
                    "finish_reason": reply.stop_reason or ("tool_calls" if reply.tool_calls else "stop"),
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": u.get("cached_tokens", 0), "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
        }

    @staticmethod
    def tool_call(call: dict) -> dict:
        arguments = call["arguments"] if isinstance(call["arguments"], str) else json.dumps(call["arguments"])
        return {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": arguments}}

    @staticmethod
    def system_of(body: dict) -> str:
        return next((m["content"] for m in body["messages"] if m["role"] == "system"), "")

    @staticmethod
    def user_text(body: dict) -> str:
        return body["messages"][-1]["content"]
