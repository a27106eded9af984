"""A small client of an OpenAI-compatible chat-completions endpoint, with retries.

``POST <base_url>/chat/completions`` with ``{"model", "messages", "temperature"}``
and the reply's ``choices[0].message.content``. A failed request (connection
error, timeout, HTTP error, a reply without content) is retried after
``backoff_s``, doubled at each retry; after ``retries`` retries the call raises
``EndpointUnavailable``, which the caller turns into an ended episode, never a
dead run. ``stats`` counts requests, failed attempts and calls given up.
Standard library only: no SDK is needed.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from agentcredit.envs.tau.options import EndpointConfig


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
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.endpoint.api_key_env, "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _attempt(self, body: bytes) -> str:
        request = urllib.request.Request(self.url, data=body, headers=self._headers(),
                                         method="POST")
        with urllib.request.urlopen(request, timeout=self.endpoint.timeout_s) as response:
            reply = json.loads(response.read().decode("utf-8"))
        content = reply["choices"][0]["message"]["content"]
        if not isinstance(content, str):
            raise TypeError(f"the reply has no text content: {str(reply)[:200]}")
        return content

    def complete(self, messages: list[dict[str, str]]) -> str:
        """The endpoint's reply to ``messages``; raises ``EndpointUnavailable`` after the
        retries."""
        self.stats.requests += 1
        body = json.dumps({"model": self.endpoint.model, "messages": messages,
                           "temperature": self.endpoint.temperature}).encode("utf-8")
        last_error: Exception | None = None
        for attempt in range(self.endpoint.retries + 1):
            if attempt:
                self.sleep(self.endpoint.backoff_s * 2 ** (attempt - 1))
            try:
                return self._attempt(body)
            except (OSError, ValueError, KeyError, IndexError, TypeError) as err:
                self.stats.failed_attempts += 1
                last_error = err
        self.stats.given_up += 1
        raise EndpointUnavailable(f"{self.url}: {self.endpoint.retries + 1} attempts failed; "
                                  f"the last one with {type(last_error).__name__}: {last_error}")
