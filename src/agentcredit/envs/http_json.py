"""POST a JSON body and read a JSON answer, within a deadline and a size cap: the one HTTP
path of the Search-QA retrieval client and the tau chat client.

A server may be slow, broken or hostile. ``post_json`` bounds what it can do to a run:

- the deadline covers the whole request (connecting, sending, the status line, the
  headers and the body): every socket read waits at most the time left, so a server
  that sends one byte a second is stopped when the deadline passes, not 60 s later;
- the answer's body is read up to ``max_bytes`` and refused beyond it;
- the body is parsed by ``envs.bounded_json`` (bounded nesting and numbers);
- every failure (refused connection, timeout, a malformed status line or headers, a
  body cut short, an HTTP error status, a body over the cap or not JSON) raises one
  ``HttpJsonError`` whose message starts with the URL (``"http://… did not answer
  within 10 s"``); nothing else escapes.

Standard library only.
"""

from __future__ import annotations

import http.client
import io
import json
import socket
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from agentcredit.envs import bounded_json

MAX_DEADLINE_S = 3600.0
"""The longest deadline a request may have (a client's ``timeout_s`` key's upper bound)."""


class HttpJsonError(RuntimeError):
    """A request that did not give a JSON answer; the message names the URL and the reason.

    Attributes:
        status: the HTTP status of an answer that was not 2xx, else ``None``.
    """

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class _DeadlineReader(io.RawIOBase):
    """The socket's bytes, each read waiting at most until ``deadline`` (``time.monotonic``)."""

    def __init__(self, sock: socket.socket, deadline: float):
        self.sock, self.deadline = sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        self.sock.settimeout(left)
        return self.sock.recv_into(buffer)


class _DeadlineSocket:
    """What ``http.client`` uses of a connected socket, with the reads bounded by a deadline."""

    def __init__(self, sock: socket.socket, deadline: float):
        self.sock, self.deadline = sock, deadline

    def sendall(self, data: bytes) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        self.sock.settimeout(left)
        self.sock.sendall(data)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self.sock, self.deadline))

    def close(self) -> None:
        """Nothing: ``http.client`` closes the connection while the body may still be read;
        ``post_json`` closes the socket itself when it is done."""


def post_json(url: str, payload: Any, *, deadline_s: float, max_bytes: int,
              headers: Mapping[str, str] | None = None) -> Any:
    """``POST payload`` (as JSON) to ``url`` and return the parsed JSON answer.

    Args:
        url: ``http://`` or ``https://`` endpoint.
        payload: JSON-serialisable request body.
        deadline_s: seconds the whole request may take.
        max_bytes: the longest answer body accepted.
        headers: extra request headers (``Content-Type`` is set to JSON).

    Raises:
        HttpJsonError: any failure (module notes); ``status`` is set for an HTTP error status.
    """
    if not 0 < deadline_s <= MAX_DEADLINE_S:  # a socket refuses 1e300 with OverflowError
        raise ValueError(f"post_json: deadline_s = {deadline_s:g} must be more than 0 and at "
                         f"most {MAX_DEADLINE_S:g} seconds")
    parts = urllib.parse.urlsplit(url)
    deadline = time.monotonic() + deadline_s
    connection_class = (http.client.HTTPSConnection if parts.scheme == "https"
                        else http.client.HTTPConnection)
    body = json.dumps(payload).encode("utf-8")
    try:
        connection = connection_class(parts.hostname or "", parts.port, timeout=deadline_s)
    except (ValueError, http.client.HTTPException) as err:
        raise HttpJsonError(f"{url} is not a usable URL ({_reason(err)})") from None
    sock = None
    try:
        connection.connect()
        sock = connection.sock
        connection.sock = _DeadlineSocket(sock, deadline)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        connection.request("POST", target, body=body, headers={
            **(headers or {}), "Content-Type": "application/json"})
        response = connection.getresponse()
        if not 200 <= response.status < 300:
            raise HttpJsonError(f"{url} answered HTTP {response.status}", response.status)
        if response.length is not None and response.length > max_bytes:
            raise HttpJsonError(f"{url} announced an answer of {response.length:,} bytes, over "
                                f"the {max_bytes:,}-byte cap")
        data = response.read(max_bytes + 1)
        if response.length:  # a Content-Length the body fell short of
            raise HttpJsonError(f"{url} cut its answer short ({len(data):,} bytes, "
                                f"{response.length:,} missing)")
    except TimeoutError:
        raise HttpJsonError(f"{url} did not answer within {deadline_s:g} s") from None
    except (OSError, http.client.HTTPException, ValueError) as err:
        raise HttpJsonError(f"{url} did not answer properly ({_reason(err)})") from None
    finally:
        connection.close()
        if sock is not None:
            sock.close()
    if len(data) > max_bytes:
        raise HttpJsonError(f"{url} sent an answer over the {max_bytes:,}-byte cap")
    try:
        return bounded_json.loads(data)
    except bounded_json.JsonRefused as err:
        raise HttpJsonError(f"{url} sent an answer that {err}") from None


def _reason(err: Exception) -> str:
    """``err`` in a few words on one line: its type, and its message if short."""
    text = " ".join(str(err).split())
    if not text or len(text) > 200:
        return type(err).__name__
    return f"{type(err).__name__}: {text}"
