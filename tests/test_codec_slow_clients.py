"""Slow clients must not keep a prompt one out of the codec server. Measured before: 16
connections trickling one header byte every 4 s held every slot, and a request with the
token got 503 throughout (each byte renewed the per-read timeout). Now a request's line
and headers must arrive within HEADER_SECONDS, and when every connection is taken the
one that has waited longest for its headers gives way. `vicar codec-server` runs as its
own process, spoken to over raw sockets."""

from __future__ import annotations

import socket
import threading
import time

from .test_codec import codec_server  # noqa: F401  (the fixture: `vicar codec-server` as a process)
from .test_codec_server_holes import _address, _headers, _reply, _threads

EMPTY = b'{"payloads": []}'


def _decode(url: str, token: str) -> bytes:
    """One prompt, authorised request: its reply's status line."""
    with socket.create_connection(_address(url), timeout=10) as sock:
        sock.sendall(_headers(len(EMPTY), token) + EMPTY)
        return _reply(sock, 10).split(b"\r\n", 1)[0]


class Crowd:
    """`n` slow connections, each sending `pattern(i)` byte by byte every `every` s."""

    def __init__(self, url: str, n: int, every: float, message: bytes) -> None:
        self.url, self.n, self.every, self.message = url, n, every, message
        self.stop = threading.Event()
        self.closed_early = 0
        self.threads = [threading.Thread(target=self._one, daemon=True) for _ in range(n)]

    def _one(self) -> None:
        try:
            sock = socket.create_connection(_address(self.url), timeout=5)
        except OSError:
            return
        with sock:
            for byte in self.message:
                if self.stop.wait(self.every):
                    return
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    self.closed_early += 1  # the server hung up on it: what is expected
                    return

    def __enter__(self) -> Crowd:
        for t in self.threads:
            t.start()
        time.sleep(1.0)  # all of them connected and waiting
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(10)


def test_sixteen_trickling_headers_do_not_keep_a_request_out(codec_server):  # noqa: F811
    url, token, proc = codec_server
    with Crowd(url, 16, 4.0, _headers(10, token)) as crowd:
        statuses = []
        for _ in range(6):  # over ~20 s, longer than any one header may take
            statuses.append(_decode(url, token))
            time.sleep(3)
    assert all(s.startswith(b"HTTP/1.1 200") for s in statuses), statuses
    assert crowd.closed_early >= 16  # each trickler was hung up on (its headers took too long)


def test_a_crowd_of_idle_connections_gives_way_to_a_prompt_request(codec_server):  # noqa: F811
    """More silent connections than the server keeps open: the ones that waited longest
    are closed, a request that sends its headers at once is served."""
    url, token, proc = codec_server
    with Crowd(url, 300, 60.0, b"P") as crowd:
        statuses = [_decode(url, token) for _ in range(5)]
        threads = _threads(proc.pid)
    assert all(s.startswith(b"HTTP/1.1 200") for s in statuses), statuses
    assert threads < 300 + 20, threads  # bounded by the open connections, not by the crowd
    del crowd


def test_a_kept_alive_connection_that_falls_silent_is_closed(codec_server):  # noqa: F811
    url, token, proc = codec_server
    with socket.create_connection(_address(url)) as sock:
        sock.sendall(_headers(len(EMPTY), token) + EMPTY)
        assert _reply(sock, 10).startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        sock.sendall(b"POST /deco")  # the next request's first bytes, then nothing
        assert _reply(sock, 30) == b""
        assert time.monotonic() - started < 8, "a kept-alive connection's next headers were waited for too long"
