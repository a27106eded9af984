"""A client of Search-R1's retrieval server (``search_r1/search/retrieval_server.py``).

The server answers ``POST <url>`` (``http://127.0.0.1:8000/retrieve`` when
launched as Search-R1's README shows) with the JSON body
``{"queries": [q], "topk": k, "return_scores": true}`` by
``{"result": [[{"document": {"id": ..., "contents": "title\\ntext"}, "score": s}, ...]]}``
(without scores, each item is the document itself). So a user points the
environment at the e5 + wiki-18 server they already run by its URL.

A request goes through ``envs.http_json``: ``timeout_s`` bounds the whole request
(not each read), an answer over ``MAX_ANSWER_BYTES`` is refused, and the JSON is
parsed with bounded nesting and numbers. Failures (refused connection, timeout,
a malformed answer, an HTTP error status, a body that is not this schema) are
retried ``retries`` times, waiting ``backoff_s · 2^i`` before retry ``i``; when
every try fails the client raises ``RetrievalError`` with the last reason, which
the environment shows the agent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from agentcredit.config.schema import refuse_long_backoff
from agentcredit.envs.http_json import MAX_DEADLINE_S, HttpJsonError, post_json
from agentcredit.envs.searchqa.corpus import Passage
from agentcredit.envs.searchqa.retrieval import RetrievalError

MAX_ANSWER_BYTES = 4 << 20
"""The longest answer body accepted (a top-k of wiki-18 passages is a few kilobytes)."""


def parse_server_result(body: Any, k: int) -> list[Passage]:
    """The passages of one query's result in a server response body (see the module notes).

    Raises:
        RetrievalError: the body does not follow the server's schema.
    """
    try:
        items = body["result"][0]
        docs = [item.get("document", item) for item in items]
        return [Passage.from_contents(str(doc.get("id", "")), doc["contents"])
                for doc in docs[:k]]
    except (KeyError, IndexError, TypeError, AttributeError) as err:
        raise RetrievalError(f"the retrieval server's answer is not "
                             f"{{'result': [[{{'document': {{'contents': ...}}}}]]}} "
                             f"({type(err).__name__}: {err})") from None


class ServerRetriever:
    """Queries a Search-R1 retrieval server at ``url``.

    Args:
        url: the full endpoint, ``http://host:port/retrieve``.
        timeout_s: seconds one request may take, from connecting to the last byte.
        retries: further tries after a failed one.
        backoff_s: wait before the first retry; it doubles with each retry.
        sleep: how to wait (tests pass a recorder).
    """

    def __init__(self, url: str, timeout_s: float = 10.0, retries: int = 3,
                 backoff_s: float = 0.5, sleep: Callable[[float], None] = time.sleep):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"retrieval server url {url!r} must start with http:// or "
                             "https:// (for example http://127.0.0.1:8000/retrieve)")
        if not 0 < timeout_s <= MAX_DEADLINE_S or retries < 0 or backoff_s < 0:
            raise ValueError(f"ServerRetriever: timeout_s={timeout_s} must be > 0 and at most "
                             f"{MAX_DEADLINE_S:g}, retries={retries} and backoff_s={backoff_s} "
                             ">= 0")
        refuse_long_backoff("ServerRetriever", retries, backoff_s)
        self.url, self.timeout_s, self.retries, self.backoff_s = url, timeout_s, retries, backoff_s
        self._sleep = sleep

    def _request(self, query: str, k: int) -> list[Passage]:
        try:
            body = post_json(self.url, {"queries": [query], "topk": k, "return_scores": True},
                             deadline_s=self.timeout_s, max_bytes=MAX_ANSWER_BYTES)
        except HttpJsonError as err:
            raise RetrievalError(f"the retrieval server at {err}") from None
        return parse_server_result(body, k)

    def search(self, query: str, k: int) -> list[Passage]:
        attempt = 0
        while True:
            try:
                return self._request(query, k)
            except RetrievalError:
                if attempt == self.retries:
                    raise
                self._sleep(self.backoff_s * 2 ** attempt)
                attempt += 1
