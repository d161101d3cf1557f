"""The codec server: Temporal's protocol for letting the Web UI and `temporal` CLI show
sealed payloads (POST /encode and /decode, body and reply `{"payloads": [...]}` in
protobuf JSON). Only for those allowed to see memory contents: every request needs the
bearer token, the server listens on loopback unless told otherwise, and CORS admits
only the UI origins named. docs/codec.md, "Codec server"."""

from __future__ import annotations

import hmac
import io
import ipaddress
import json
import logging
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from temporalio.api.common.v1 import Payloads

from vicar.errors import CodecKeyError
from vicar.runtime.codec import AesGcmCodec
from vicar.settings import ReadAtUse, Settings, secret

TOKEN_VAR = "VICAR_CODEC_SERVER_TOKEN"
TOKEN_FILE = "codec-server-token"
DEFAULT_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")  # the embedded server's UI
MAX_BODY_BYTES = 16 * 1024 * 1024  # far above a UI page's payloads; refuses a memory-filling body
MIN_TOKEN_CHARS = 16
log = logging.getLogger("vicar.runtime.codec_server")
# A request's line and headers must arrive whole within HEADER_SECONDS of the moment
# the server waits for them (a kept-alive connection's next request too), and then its
# whole body within READ_SECONDS: a client that stalls or trickles (one byte every few
# seconds) holds a thread and a buffer for no longer.
HEADER_SECONDS = 5
READ_SECONDS = 10
MAX_CONNECTIONS = 16  # requests served at once (past their headers); more are refused at once (503)
# Connections open at once, most of them waiting for their headers (cheap: a thread and
# a socket). When all are taken, the one that has waited longest for its headers is
# closed to let the new one in: slow clients cannot keep a prompt one out by number.
MAX_OPEN = 256
MAX_NESTING = 32  # a body {"payloads": [...]} nests 4 deep; json and protobuf recurse per level
DRAIN_BYTES, DRAIN_SECONDS = 256 * 1024, 1.0  # read after a refusal, so the reply is not lost to a reset


def server_token(settings: Settings) -> tuple[str, str]:
    """(token, where it came from). From the environment, else a file under the data dir
    made 0600 on first use (the operator hands it to those allowed to decode)."""
    raw = secret(ReadAtUse().codec_server_token)  # not in Settings: a secret
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


class _Server(ThreadingHTTPServer):
    """At most MAX_OPEN connections open and MAX_CONNECTIONS requests served at once; a
    connection that has waited longest for its headers gives way to a new one; an error
    in one is one log line."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.serving = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._lock = threading.Lock()
        self._open = 0
        self._waiting: dict[socket.socket, float] = {}  # waiting for headers -> since (monotonic)

    def process_request(self, request, client_address) -> None:
        with self._lock:
            full = self._open >= MAX_OPEN
            if full and self._waiting:
                oldest = min(self._waiting, key=self._waiting.__getitem__)
                del self._waiting[oldest]
                _hang_up(oldest)  # its thread sees its input end, and finishes
                full = False
            if not full:
                self._open += 1
        if full:  # every open connection is past its headers, being served: busy
            try:
                request.sendall(BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._closed()  # no thread was started to do it
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.headers_done(request)
            self._closed()

    def _closed(self) -> None:
        with self._lock:
            self._open -= 1

    def waiting_for_headers(self, conn: socket.socket) -> None:
        with self._lock:
            self._waiting[conn] = time.monotonic()

    def headers_done(self, conn: socket.socket) -> None:
        with self._lock:
            self._waiting.pop(conn, None)

    def handle_error(self, request, client_address) -> None:
        exc = sys.exc_info()[1]
        log.warning("codec server: a request failed: %s", " ".join(f"{type(exc).__name__}: {exc}".split())[:300])


def _hang_up(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _Deadline(io.RawIOBase):
    """A connection's input whose reads end at the handler's header deadline, however
    the bytes trickle in (a socket's own timeout is per read: one byte every few seconds
    never meets it)."""

    def __init__(self, conn: socket.socket, handler) -> None:
        self.conn, self.handler = conn, handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        deadline = self.handler.header_deadline
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the request's headers did not arrive within {HEADER_SECONDS} s")
            self.conn.settimeout(left)
        return self.conn.recv_into(buffer)


BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


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
        self.httpd = _Server((host, port), self._handler())
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
        try:
            doc = json.loads(body)  # deeper than the interpreter's recursion: RecursionError
        except RecursionError:
            raise Nested from None
        if _depth(doc) > MAX_NESTING:
            raise Nested
        ParseDict(doc, payloads)  # a bad body raises ValueError / ParseError
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
            timeout = READ_SECONDS  # each read or write, beside the deadlines below
            header_deadline: float | None = None
            has_slot = False

            def setup(self) -> None:
                super().setup()
                self.rfile = io.BufferedReader(_Deadline(self.connection, self))

            def handle_one_request(self) -> None:
                # Headers first, within HEADER_SECONDS of waiting for them, on a connection
                # that gives way to a new one if the server is full meanwhile.
                self.header_deadline = time.monotonic() + HEADER_SECONDS
                self.server.waiting_for_headers(self.connection)  # type: ignore[attr-defined]
                try:
                    super().handle_one_request()
                finally:
                    self._headers_done()
                    if self.has_slot:
                        self.has_slot = False
                        self.server.serving.release()  # type: ignore[attr-defined]

            def _headers_done(self) -> None:
                self.header_deadline = None
                self.server.headers_done(self.connection)  # type: ignore[attr-defined]
                self.connection.settimeout(READ_SECONDS)

            def parse_request(self) -> bool:
                if not super().parse_request():
                    return False
                self._headers_done()
                if not self.server.serving.acquire(blocking=False):  # type: ignore[attr-defined]
                    self._refuse(503, f"busy: {MAX_CONNECTIONS} requests are being served; try again")
                    return False
                self.has_slot = True
                return True

            def _cors(self) -> None:
                origin = (self.headers.get("Origin") or "").rstrip("/")
                if origin in server.origins:
                    self.send_header("Access-Control-Allow-Origin", origin)
                    self.send_header("Access-Control-Allow-Credentials", "true")
                    self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
                    self.send_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Namespace")
                    self.send_header("Vary", "Origin")

            def _reply(self, status: int, body: bytes, kind: str = "application/json", close: bool = False) -> None:
                self.send_response(status)
                self._cors()
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")  # decoded memory contents
                if close:
                    self.send_header("Connection", "close")  # also sets close_connection
                self.end_headers()
                self.wfile.write(body)

            def _error(self, status: int, message: str, close: bool = False) -> None:
                self._reply(status, json.dumps({"message": message}).encode(), close=close)

            def _refuse(self, status: int, message: str) -> None:
                """Refused before the body is read: say so, then close. The unread body
                must not be taken for the next request; what of it is already on its way
                is drained (a little, briefly) so a reset does not swallow the reply."""
                self._error(status, message, close=True)
                self.wfile.flush()
                try:
                    self.connection.shutdown(socket.SHUT_WR)
                    deadline, drained = time.monotonic() + DRAIN_SECONDS, 0
                    while drained < DRAIN_BYTES and (left := deadline - time.monotonic()) > 0:
                        self.connection.settimeout(left)
                        chunk = self.connection.recv(65536)
                        if not chunk:
                            break
                        drained += len(chunk)
                except OSError:
                    pass

            def _body(self, length: int) -> bytes | None:
                """The body, or None if it does not all arrive within READ_SECONDS."""
                deadline, body = time.monotonic() + READ_SECONDS, bytearray()
                try:
                    while len(body) < length:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            return None
                        self.connection.settimeout(left)
                        chunk = self.rfile.read1(min(length - len(body), 1 << 16))
                        if not chunk:
                            return None
                        body += chunk
                except OSError:  # a timeout, a reset
                    return None
                finally:
                    self.connection.settimeout(READ_SECONDS)
                return bytes(body)

            def do_OPTIONS(self) -> None:  # CORS preflight: carries no credentials by design
                self._reply(204, b"", "text/plain")

            def do_POST(self) -> None:
                # Everything the headers tell is checked before one byte of the body is read.
                # /decode, or /<token>/decode for a UI that sends no Authorization header
                # (the dev server's UI has no login, so no access token to pass).
                parts = self.path.split("?", 1)[0].strip("/").split("/")
                action = parts[-1]
                if action not in ("encode", "decode") or len(parts) > 2:
                    return self._refuse(404, "POST /encode or /decode")
                auth = self.headers.get("Authorization") or (f"Bearer {parts[0]}" if len(parts) == 2 else None)
                if not server.authorized(auth):
                    return self._refuse(401, "a bearer token is required (docs/codec.md)")
                try:
                    length = int(self.headers.get("Content-Length") or "0")
                except ValueError:
                    length = -1
                if not 0 <= length <= MAX_BODY_BYTES:
                    return self._refuse(
                        413 if length > MAX_BODY_BYTES else 400,
                        f"a body of at most {MAX_BODY_BYTES} bytes, with its Content-Length",
                    )
                body = self._body(length)
                if body is None:
                    return self._error(408, f"the body did not arrive within {READ_SECONDS} s", close=True)
                try:
                    self._reply(200, server.convert(action, body))
                except CodecKeyError as exc:
                    self._error(422, str(exc))
                except Nested:
                    self._error(400, f"the body nests too deeply: a codec body nests at most {MAX_NESTING} levels")
                except (ValueError, ParseError, TypeError, AttributeError):
                    self._error(400, 'the body must be {"payloads": [{"metadata": {...}, "data": "<base64>"}]}')

            def do_GET(self) -> None:
                self._refuse(405, "POST /encode or /decode")  # any body it carries stays unread

            def log_message(self, *args) -> None:
                pass  # request lines may carry tokens; nothing here is worth a log line

        return Handler


def _depth(doc: object) -> int:
    """How deep lists and objects nest, without recursion."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, level)
            if level <= MAX_NESTING:  # past it the answer is known
                stack += [(child, level + 1) for child in (node.values() if isinstance(node, dict) else node)]
    return deepest


class Nested(Exception):
    """A body nested deeper than any codec body (json or protobuf ran out of recursion)."""


def default_origins(settings: Settings) -> tuple[str, ...]:
    """The embedded server's UI, on the port the settings give it (VICAR_SERVER_UI_PORT) or 8233."""
    ui = settings.server.ui_port or 8233
    return (f"http://localhost:{ui}", f"http://127.0.0.1:{ui}")


def run(settings: Settings, host: str, port: int, origins: list[str], say) -> None:
    """Serve until SIGTERM (exit 0) or Ctrl-C; `say` prints the one line of where."""
    import signal

    from vicar.runtime.codec import codec

    token, where = server_token(settings)
    from vicar.runtime.server import env_configured, hold_use

    if not env_configured():
        hold_use(settings.data_dir)  # it serves the embedded server's UI: that stays up while it runs
    try:
        server = CodecServer(codec(settings), token, host, port, origins or default_origins(settings))
    except OSError as exc:  # a bad host, a port in use or privileged
        from vicar.runtime.listening import bind_error

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
