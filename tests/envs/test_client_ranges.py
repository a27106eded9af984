"""The HTTP clients' timeouts and retries are bounded: a deadline a socket cannot take and a
back-off that would wait for years are refused in one line naming the key
(envs/http_json.py, the tau and Search-QA options)."""

from __future__ import annotations

import pytest

from agentcredit.config import ConfigError, load_config
from agentcredit.config.schema import refuse_long_backoff
from agentcredit.envs.http_json import post_json
from agentcredit.envs.searchqa.server import ServerRetriever


@pytest.mark.parametrize("override, message", [
    ("env.searchqa.retriever_timeout_s=1e300",
     "env.searchqa.retriever_timeout_s = 1e+300 is out of range; allowed (0.0, 3600.0]"),
    ("env.searchqa.retriever_retries=40",
     "env.searchqa.retriever_retries = 40 is out of range; allowed [0, 12]"),
])
def test_searchqa_client_ranges_are_one_line_naming_the_key(override, message):
    with pytest.raises(ConfigError) as refused:
        load_config(None, ["env=searchqa", override])
    assert str(refused.value) == message


def test_a_tau_endpoints_planned_backoff_is_bounded_to_an_hour():
    # 1 s doubling over 12 retries waits 1 + 2 + ... + 2048 = 4095 s, over 3600; 11 retries 2047 s
    with pytest.raises(ConfigError) as refused:
        load_config(None, ["env=tau-retail", "env.tau.user_endpoint.retries=12"])
    assert str(refused.value) == (
        "env.tau.user_endpoint.retries = 12 with a back-off of 1 s doubling at each retry plans "
        "4,095 s of waiting, more than the 3,600 s allowed; lower retries (or backoff_s)")
    load_config(None, ["env=tau-retail", "env.tau.user_endpoint.retries=11"])
    with pytest.raises(ConfigError, match="timeout_s = 1e\\+300 is out of range"):
        load_config(None, ["env=tau-retail", "env.tau.judge_endpoint.timeout_s=1e300"])


def test_a_deadline_a_socket_cannot_take_is_refused_before_connecting():
    with pytest.raises(ValueError, match="deadline_s = 1e\\+300 must be more than 0 and at most"):
        post_json("http://127.0.0.1:9/x", {}, deadline_s=1e300, max_bytes=10)
    with pytest.raises(ValueError, match="timeout_s=1e\\+300 must be > 0 and at most 3600"):
        ServerRetriever("http://127.0.0.1:9/retrieve", timeout_s=1e300)
    with pytest.raises(ConfigError, match="ServerRetriever.retries = 40 .* more than the 3,600"):
        ServerRetriever("http://127.0.0.1:9/retrieve", retries=40)
    refuse_long_backoff("x", 0, 60.0)  # no retry plans no wait
