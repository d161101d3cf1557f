"""The codec server: Temporal's protocol for letting the Web UI and `temporal` CLI show
sealed payloads (POST /encode and /decode, body and reply `{"payloads": [...]}` in
protobuf JSON). Only for those allowed to see memory contents: every request needs the
bearer token, the server listens on loopback unless told otherwise, and CORS admits
only the UI origins named. docs/codec.md, "Codec server"."""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from temporalio.api.common.v1 import Payloads

from vicar import settings_env
from vicar.codec import AesGcmCodec, CodecKeyError
from vicar.config import Settings

TOKEN_VAR = "VICAR_CODEC_SERVER_TOKEN"
TOKEN_FILE = "codec-server-token"
DEFAULT_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")  # the embedded server's UI
MAX_BODY_BYTES = 16 * 1024 * 1024  # far above a UI page's payloads; refuses a memory-filling body
MIN_TOKEN_CHARS = 16


def server_token(settings: Settings) -> tuple[str, str]:
    """(token, where it came from). From the environment, else a file under the data dir
    made 0600 on first use (the operator hands it to those allowed to decode)."""
    raw = settings_env.text(TOKEN_VAR)  # not in Settings: a secret
    if raw:
        if len(raw) < MIN_TOKEN_CHARS:
            from vicar.errors import InvalidInput

            raise InvalidInput(f"{TOKEN_VAR} must have at least {MIN_TOKEN_CHARS} characters")
        return raw, TOKEN_VAR
    path = settings.data_dir / TOKEN_FILE
    if not path.exists():
        # Whole or absent (written aside, then linked): a half-written file is never read.
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(32) + "\n")
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: read theirs
        finally:
            tmp.unlink(missing_ok=True)
    token = path.read_text().strip()
    if len(token) < MIN_TOKEN_CHARS:
        from vicar.errors import InvalidInput

        raise InvalidInput(f"{path}: the token must have at least {MIN_TOKEN_CHARS} characters")
    return token, str(path)


class CodecServer:
    def __init__(
        self,
        codec: AesGcmCodec,
        token: str,
        host: str = "127.0.0.1",
        port: int = 0,
        origins: Iterable[str] = DEFAULT_ORIGINS,
    ) -> None:
        self.codec, self.token, self.origins = codec, token, frozenset(o.rstrip("/") for o in origins)
        self.httpd = ThreadingHTTPServer((host, port), self._handler())
        self.httpd.daemon_threads = True
        bound, self.port = self.httpd.server_address[:2]
        self.host = str(bound)  # an IP address (the type allows a Unix socket's bytes)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        threading.Thread(target=self.httpd.serve_forever, name="codec-server", daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def authorized(self, header: str | None) -> bool:
        scheme, _, value = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), self.token.encode())

    def convert(self, action: str, body: bytes) -> bytes:
        payloads = Payloads()
        ParseDict(json.loads(body), payloads)  # a bad body raises ValueError / ParseError
        out = (
            [self.codec.seal(p) for p in payloads.payloads]
            if action == "encode"
            else [self.codec.open(p) for p in payloads.payloads]
        )
        return json.dumps(MessageToDict(Payloads(payloads=out))).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _cors(self) -> None:
                origin = (self.headers.get("Origin") or "").rstrip("/")
                if origin in server.origins:
                    self.send_header("Access-Control-Allow-Origin", origin)
                    self.send_header("Access-Control-Allow-Credentials", "true")
                    self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
                    self.send_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Namespace")
                    self.send_header("Vary", "Origin")

            def _reply(self, status: int, body: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self._cors()
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")  # decoded memory contents
                self.end_headers()
                self.wfile.write(body)

            def _error(self, status: int, message: str) -> None:
                self._reply(status, json.dumps({"message": message}).encode())

            def do_OPTIONS(self) -> None:  # CORS preflight: carries no credentials by design
                self._reply(204, b"", "text/plain")

            def do_POST(self) -> None:
                try:
                    length = int(self.headers.get("Content-Length") or "0")
                except ValueError:
                    length = -1
                if not 0 <= length <= MAX_BODY_BYTES:
                    self.close_connection = True  # the body stays unread: this connection is done
                    return self._error(
                        413 if length > MAX_BODY_BYTES else 400,
                        f"a body of at most {MAX_BODY_BYTES} bytes, with its Content-Length",
                    )
                body = self.rfile.read(length)  # read before any reply: the connection is kept alive
                # /decode, or /<token>/decode for a UI that sends no Authorization header
                # (the dev server's UI has no login, so no access token to pass).
                parts = self.path.split("?", 1)[0].strip("/").split("/")
                action = parts[-1]
                if action not in ("encode", "decode") or len(parts) > 2:
                    return self._error(404, "POST /encode or /decode")
                auth = self.headers.get("Authorization") or (f"Bearer {parts[0]}" if len(parts) == 2 else None)
                if not server.authorized(auth):
                    return self._error(401, "a bearer token is required (docs/codec.md)")
                try:
                    self._reply(200, server.convert(action, body))
                except CodecKeyError as exc:
                    self._error(422, str(exc))
                except (ValueError, ParseError, TypeError, AttributeError):
                    self._error(400, 'the body must be {"payloads": [{"metadata": {...}, "data": "<base64>"}]}')

            def do_GET(self) -> None:
                self._error(405, "POST /encode or /decode")

            def log_message(self, *args) -> None:
                pass  # request lines may carry tokens; nothing here is worth a log line

        return Handler


def run(settings: Settings, host: str, port: int, origins: list[str], say) -> None:
    """Serve until SIGTERM (exit 0) or Ctrl-C; `say` prints the one line of where."""
    import signal

    from vicar.codec import codec

    token, where = server_token(settings)
    try:
        server = CodecServer(codec(settings), token, host, port, origins or DEFAULT_ORIGINS)
    except OSError as exc:  # a bad host, a port in use or privileged
        from vicar.listening import bind_error

        raise bind_error(exc, host, port) from None
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    say(
        f"codec server on {server.url} (POST /encode, /decode; bearer token from {where}; "
        f"CORS for {', '.join(sorted(server.origins))})"
    )
    if not ipaddress.ip_address(server.host).is_loopback:
        say(
            "warning: not on loopback: the token and decoded memory cross the network; put TLS in front (docs/codec.md)"
        )
    try:
        while not stop.wait(0.5):
            pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.close()
