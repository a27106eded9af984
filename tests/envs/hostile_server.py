"""A hostile HTTP server on the loopback address, for the network clients' tests.

``HostileServer(kind)`` listens on 127.0.0.1 (an ephemeral port, never another
interface) and answers every connection the way ``REPLIES`` names: a broken
status line, a body cut short, too many or too long headers, deeply nested JSON,
a 5,000-digit integer, one byte every 0.2 s, a body announced or streamed over
the clients' size caps. It serves connections one at a time, and every loop is
bounded: it stops accepting after ``lifetime_s`` (or when its ``with`` block
ends), a drip or a stream ends after a fixed number of bytes or when the client
hangs up, and a request is read for at most a second.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Self

OK_BODY = b'{"result": [[{"document": {"id": "1", "contents": "\\"T\\"\\ntext"}, "score": 1.0}]]}'


def _response(body: bytes, *headers: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/json", *headers]
    if not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


#: kind -> the bytes sent at once; "drip" and "stream" are sent over time (``_serve``)
REPLIES = {
    "ok": _response(OK_BODY),
    "bad_status": b"SPAM 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    "cut_short": _response(OK_BODY[:20], f"Content-Length: {len(OK_BODY)}"),
    "cut_chunk": _response(b"40\r\n" + OK_BODY[:20], "Transfer-Encoding: chunked"),
    "many_headers": _response(b"{}", *(f"X-Spam-{i}: x" for i in range(500))),
    "long_header": _response(b"{}", "X-Spam: " + "x" * 100_000),
    "deep_json": _response(b"[" * 10_000 + b"]" * 10_000),
    "huge_integer": _response(b'{"result": [[{"document": {"id": 1, "contents": "a"}, '
                              b'"score": ' + b"9" * 5_000 + b"}]]}"),
    "announced_over_cap": _response(b"", "Content-Length: 300000000"),
    "http_error": b"HTTP/1.1 503 Busy\r\nContent-Length: 2\r\n\r\n{}",
}
DRIP = _response(b'{"result": [[]], "padding": "' + b"x" * 1_000 + b'"}')
DRIP_INTERVAL_S = 0.2
STREAM_CHUNK, STREAM_CHUNKS = b"x" * 65_536, 160  # 10 MiB, over every client's cap
KINDS = (*REPLIES, "drip", "stream")


class HostileServer:
    """Answers every request as ``kind`` says (module notes); use it as a context manager."""

    def __init__(self, kind: str, lifetime_s: float = 10.0):
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
        self.kind, self.requests = kind, 0
        self._end = time.monotonic() + lifetime_s
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def url(self, path: str = "/retrieve") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _live(self) -> bool:
        return not self._stop.is_set() and time.monotonic() < self._end

    def _accept(self) -> None:
        while self._live():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    self._read_request(conn)
                    self.requests += 1
                    self._serve(conn)
                except OSError:  # the client hung up or gave up: the next connection
                    pass

    def _read_request(self, conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65_536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            chunk = conn.recv(65_536)
            if not chunk:
                return
            body += chunk

    def _serve(self, conn: socket.socket) -> None:
        if self.kind == "drip":
            for i in range(len(DRIP)):
                if not self._live():
                    return
                conn.sendall(DRIP[i:i + 1])
                time.sleep(DRIP_INTERVAL_S)
        elif self.kind == "stream":
            conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
            for _ in range(STREAM_CHUNKS):
                if not self._live():
                    return
                conn.sendall(STREAM_CHUNK)
        else:
            conn.sendall(REPLIES[self.kind])
