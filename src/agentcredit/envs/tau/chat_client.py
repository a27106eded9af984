"""A small client of an OpenAI-compatible chat-completions endpoint, with retries.

``POST <base_url>/chat/completions`` with ``{"model", "messages", "temperature"}``
and the reply's ``choices[0].message.content``. A request goes through
``envs.http_json``: ``timeout_s`` bounds the whole request (not each read), a reply
over ``MAX_REPLY_BYTES`` is refused, and the JSON is parsed with bounded nesting
and numbers. A failed request (connection error, timeout, a malformed or oversized
answer, an HTTP error status, a reply without content) is retried after
``backoff_s``, doubled at each retry; after ``retries`` retries the call raises
``EndpointUnavailable``, which the caller turns into an ended episode, never a
dead run. ``stats`` counts requests, failed attempts and calls given up.
Standard library only: no SDK is needed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from agentcredit.envs.http_json import HttpJsonError, post_json
from agentcredit.envs.tau.options import EndpointConfig

MAX_REPLY_BYTES = 1 << 20
"""The longest reply body accepted (a user turn or a judgement is a few hundred bytes)."""


class EndpointUnavailable(RuntimeError):
    """Every attempt of a request failed; the message names the URL and the last error."""


@dataclass
class ChatStats:
    """Counters of one client.

    Attributes:
        requests: calls of ``complete``.
        failed_attempts: attempts that failed (each retried one counts).
        given_up: calls that raised ``EndpointUnavailable``.
    """

    requests: int = 0
    failed_attempts: int = 0
    given_up: int = 0


class ChatClient:
    """Chat completions from ``endpoint`` (see the module notes); ``sleep`` is injectable for
    tests."""

    def __init__(self, endpoint: EndpointConfig, sleep: Callable[[float], None] = time.sleep):
        if not endpoint.base_url or not endpoint.model:
            raise ValueError("an LLM endpoint needs base_url and model (for example "
                             "env.tau.user_endpoint.base_url=http://localhost:8000/v1 "
                             "env.tau.user_endpoint.model=Qwen/Qwen2.5-7B-Instruct)")
        self.endpoint = endpoint
        self.url = endpoint.base_url.rstrip("/") + "/chat/completions"
        self.sleep = sleep
        self.stats = ChatStats()

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.endpoint.api_key_env, "")
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _attempt(self, body: dict) -> str:
        reply = post_json(self.url, body, deadline_s=self.endpoint.timeout_s,
                          max_bytes=MAX_REPLY_BYTES, headers=self._headers())
        try:
            content = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise HttpJsonError(f"{self.url} sent a reply without choices[0].message.content: "
                                f"{str(reply)[:200]}")
        return content

    def complete(self, messages: list[dict[str, str]]) -> str:
        """The endpoint's reply to ``messages``; raises ``EndpointUnavailable`` after the
        retries."""
        self.stats.requests += 1
        body = {"model": self.endpoint.model, "messages": messages,
                "temperature": self.endpoint.temperature}
        last_error: Exception | None = None
        for attempt in range(self.endpoint.retries + 1):
            if attempt:
                self.sleep(self.endpoint.backoff_s * 2 ** (attempt - 1))
            try:
                return self._attempt(body)
            except HttpJsonError as err:
                self.stats.failed_attempts += 1
                last_error = err
        self.stats.given_up += 1
        raise EndpointUnavailable(f"{self.url}: {self.endpoint.retries + 1} attempts failed; "
                                  f"the last one: {last_error}")
