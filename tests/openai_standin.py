"""A local HTTP stand-in for OpenAI's embeddings endpoint, speaking its wire format,
so the real `openai` SDK runs in tests without a key or network."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


def fake_vector(text: str, dim: int = 1536) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return np.random.default_rng(seed).normal(size=dim).astype(np.float32)


class OpenAIStandIn:
    def __init__(self, fail_with: int | None = None) -> None:
        self.requests: list[dict] = []
        self.fail_with = fail_with
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                standin.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if standin.fail_with:
                    return self._send(
                        standin.fail_with, {"error": {"message": "quota exceeded", "type": "insufficient_quota"}}
                    )
                if self.path != "/v1/embeddings":
                    return self._send(404, {"error": {"message": "not found"}})
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                data = []
                for i, text in enumerate(texts):
                    vec = fake_vector(text)
                    emb = (
                        base64.b64encode(vec.tobytes()).decode()
                        if body.get("encoding_format") == "base64"
                        else vec.tolist()
                    )
                    data.append({"object": "embedding", "index": i, "embedding": emb})
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": data,
                        "model": body["model"],
                        "usage": {"prompt_tokens": 3 * len(texts), "total_tokens": 3 * len(texts)},
                    },
                )

            def _send(self, status, payload):
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
