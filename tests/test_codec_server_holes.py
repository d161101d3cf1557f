"""Issue 34, item 6: the codec server read a body before it checked the token, with no
read timeout: 20 unauthenticated connections of 16 MB took it from 91 to 419 MB and 224
threads; a deeply nested body (with the token) ended in a RecursionError and 5,300 lines
of log. `vicar codec-server` runs as its own process here, spoken to over raw sockets."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from vicar.runtime import codec_server as server

from .test_codec import codec_server  # noqa: F401  (the fixture: `vicar codec-server` as a process)

BIG = 16_000_000
READ_SECONDS = getattr(server, "READ_SECONDS", 10)  # the whole body's deadline


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":", 1) for line in lines if ":" in line)


def _kib(pid: int, field: str) -> int:
    return int(_status(pid)[field].split()[0])


def _threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def _headers(length: int, token: str | None = None, path: str = "/decode") -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{auth}Content-Length: {length}\r\n\r\n"
    ).encode()


def _reply(sock: socket.socket, timeout: float) -> bytes:
    """What the server sends until it closes the connection or `timeout` passes."""
    sock.settimeout(timeout)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
            if b"\r\n\r\n" in got and b"Content-Length: " in got:
                head, _, body = got.partition(b"\r\n\r\n")
                length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
                if len(body) >= length:
                    break
    except (TimeoutError, ConnectionResetError):
        pass
    return got


def test_an_unauthenticated_body_is_never_read(codec_server):  # noqa: F811
    url, token, proc = codec_server
    with socket.create_connection(_address(url)) as sock:
        sock.sendall(_headers(BIG))  # and not one byte of the body
        started = time.monotonic()
        reply = _reply(sock, 5)
    assert reply.startswith(b"HTTP/1.1 401"), reply[:200]
    assert time.monotonic() - started < 5
    assert b"Connection: close" in reply  # the unread body must not be taken for a request


def test_twenty_unauthenticated_uploads_leave_memory_and_threads_flat(codec_server):  # noqa: F811
    url, token, proc = codec_server
    peak_before, threads_before = _kib(proc.pid, "VmHWM"), _threads(proc.pid)
    body = b"x" * BIG
    socks: list[socket.socket] = []

    def upload() -> None:
        sock = socket.create_connection(_address(url))
        socks.append(sock)
        try:
            sock.sendall(_headers(BIG) + body)
        except OSError:
            pass  # refused and closed before the body was read: what is expected

    uploads = [threading.Thread(target=upload) for _ in range(20)]
    for t in uploads:
        t.start()
    for t in uploads:
        t.join(60)
    time.sleep(1)
    try:
        grown_mb = (_kib(proc.pid, "VmHWM") - peak_before) / 1024
        threads = _threads(proc.pid)
    finally:
        for sock in socks:
            sock.close()
    assert grown_mb < 40, f"the server's peak memory grew by {grown_mb:.0f} MB"
    assert threads <= threads_before + 2, (threads_before, threads)


def test_a_body_that_stalls_is_dropped_and_its_size_is_bounded(codec_server):  # noqa: F811
    url, token, proc = codec_server
    with socket.create_connection(_address(url)) as sock:
        sock.sendall(_headers(1000, token) + b'{"payloads"')  # then nothing
        started = time.monotonic()
        reply = _reply(sock, READ_SECONDS + 10)
    assert time.monotonic() - started < READ_SECONDS + 5, "the server waited for the rest of the body"
    assert reply == b"" or reply.startswith(b"HTTP/1.1 408"), reply[:200]
    with socket.create_connection(_address(url)) as sock:
        sock.sendall(_headers(server.MAX_BODY_BYTES + 1, token))
        assert _reply(sock, 5).startswith(b"HTTP/1.1 413")


def test_deep_nesting_is_refused_in_one_line(codec_server):  # noqa: F811
    url, token, proc = codec_server
    deep = b'{"payloads": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    with socket.create_connection(_address(url)) as sock:
        sock.sendall(_headers(len(deep), token) + deep)
        reply = _reply(sock, 10)
    assert reply.startswith(b"HTTP/1.1 400"), reply[:300]
    assert b"nest" in reply.partition(b"\r\n\r\n")[2]
    # The server goes on, and its log holds no traceback.
    with socket.create_connection(_address(url)) as sock:
        sock.sendall(_headers(len(b'{"payloads": []}'), token) + b'{"payloads": []}')
        assert _reply(sock, 10).startswith(b"HTTP/1.1 200")
    proc.terminate()
    proc.wait(10)
    log = proc.stderr.read()
    assert "Traceback" not in log and "RecursionError" not in log, log[-2000:]
