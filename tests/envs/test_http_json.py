"""The HTTP path of the network clients against a hostile loopback server: each way a server
can misbehave ends as one ``HttpJsonError`` naming the URL, within the request's deadline."""

import time

import pytest

from agentcredit.envs.http_json import HttpJsonError, post_json

from .hostile_server import KINDS, OK_BODY, HostileServer

#: what the error says for each kind of hostile answer (every message starts with the URL)
REASONS = {
    "bad_status": "did not answer properly (BadStatusLine",
    "cut_short": f"cut its answer short (20 bytes, {len(OK_BODY) - 20} missing)",
    "cut_chunk": "did not answer properly (IncompleteRead",
    "many_headers": "did not answer properly (HTTPException: got more than 100 headers)",
    "long_header": "did not answer properly (LineTooLong",
    "deep_json": "sent an answer that nests arrays and objects too deep",
    "huge_integer": "sent an answer that holds a number of 5000 characters",
    "announced_over_cap": "announced an answer of 300,000,000 bytes, over the 100,000-byte cap",
    "stream": "sent an answer over the 100,000-byte cap",
    "http_error": "answered HTTP 503",
    "drip": "did not answer within 0.5 s",
}


def test_every_hostile_kind_has_an_expected_reason():
    assert set(REASONS) == set(KINDS) - {"ok"}


def test_a_well_behaved_server_gives_the_parsed_answer():
    with HostileServer("ok") as server:
        answer = post_json(server.url(), {"queries": ["q"]}, deadline_s=2.0, max_bytes=10_000)
    assert answer["result"][0][0]["score"] == 1.0 and server.requests == 1


@pytest.mark.parametrize("kind", sorted(REASONS))
def test_a_hostile_server_ends_in_one_error_naming_the_url_within_the_deadline(kind):
    with HostileServer(kind) as server:
        began = time.monotonic()
        with pytest.raises(HttpJsonError) as failed:
            post_json(server.url(), {"queries": ["q"]}, deadline_s=0.5, max_bytes=100_000)
        elapsed = time.monotonic() - began
    message = str(failed.value)
    assert message.startswith(server.url() + " ") and REASONS[kind] in message, message
    assert "\n" not in message
    assert elapsed < 1.5  # the slow drip would take over 200 s without the deadline
    assert (failed.value.status == 503) == (kind == "http_error")


def test_a_refused_connection_is_an_error_too():
    with HostileServer("ok") as server:
        url = server.url()
    with pytest.raises(HttpJsonError, match="did not answer properly .ConnectionRefusedError"):
        post_json(url, {}, deadline_s=0.5, max_bytes=100)
