"""The scripted user's rules, and the LLM user and judge against a small local
OpenAI-compatible server that this test starts (no internet)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentcredit.envs.tau.chat_client import ChatClient, EndpointUnavailable
from agentcredit.envs.tau.domains import load_domain
from agentcredit.envs.tau.engine import TauEnv
from agentcredit.envs.tau.llm_user import system_prompt
from agentcredit.envs.tau.options import EndpointConfig, TauConfig
from agentcredit.envs.tau.tasks import build_tasks
from agentcredit.envs.tau.users import ScriptedUser

from ..hostile_server import KINDS as HOSTILE_KINDS
from ..hostile_server import HostileServer


def test_the_scripted_user_answers_from_its_scenario_and_ends_the_conversation():
    task = load_domain("retail").tasks["0"]
    user = ScriptedUser(task, patience=2)
    assert user.reply("Hi! How can I help you today?").startswith(
        "Hi. You received your order #W2378156")
    assert user.reply("Can you tell me your name and zip code?") == (
        "You are Yusuf Rossi in zip code 19122.")
    assert user.reply("Shall I proceed with the exchange?") == "Yes, please go ahead."
    assert user.reply("One moment.").endswith("###STOP###")  # patience spent
    user = ScriptedUser(task, 5)
    user.reply("greeting")
    assert user.reply("YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.") == (
        "###TRANSFER###")
    assert user.reply("Anything else?").endswith("###STOP###")


class FakeChat:
    """A local chat-completions server: fails the first ``failures`` requests with HTTP 500,
    then answers each with the next of ``replies``; records the request bodies."""

    def __init__(self, replies, failures=0):
        self.replies, self.failures, self.bodies = list(replies), failures, []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.bodies.append((self.path, body))
                if fake.failures > 0:
                    fake.failures -= 1
                    self.send_response(500)
                    self.end_headers()
                    return
                text = fake.replies.pop(0)
                payload = json.dumps({"choices": [{"message": {"role": "assistant",
                                                               "content": text}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def _endpoint(url, retries=3):
    return EndpointConfig(base_url=url, model="fake-user", retries=retries, backoff_s=0.0,
                          timeout_s=5.0)


def test_the_llm_user_speaks_tau2s_protocol_and_retries_a_failing_endpoint():
    task = build_tasks("retail", "base")[0]
    with FakeChat(["Hi, I want to exchange two items.", "Thanks, that is all. ###STOP###"],
                  failures=2) as chat:
        env = TauEnv("retail", TauConfig(user="llm", user_endpoint=_endpoint(chat.url)))
        obs = env.reset(task)
        assert obs.text == "User: Hi, I want to exchange two items."
        assert env.stats == {"user_requests": 1, "user_failed_attempts": 2, "user_given_up": 0}
        obs, _, done, _ = env.step("Anything else?")
        assert done and obs.text.endswith("###STOP###") and env.last_reward.ending == "user_stop"
    path, body = chat.bodies[-1]
    assert path == "/v1/chat/completions" and body["model"] == "fake-user"
    assert body["temperature"] == 0.0
    roles = [m["role"] for m in body["messages"]]
    # the simulator sees the agent as "user" and itself as "assistant", from the greeting on
    assert roles == ["system", "user", "assistant", "user"]
    assert body["messages"][1]["content"] == "Hi! How can I help you today?"
    system = body["messages"][0]["content"]
    assert system == system_prompt(load_domain("retail").tasks["0"])
    assert "###STOP###" in system and "<scenario>" in system
    assert "\tYou received your order #W2378156" in system


def test_an_endpoint_that_keeps_failing_ends_the_episode_and_never_the_run():
    task = build_tasks("airline", "base")[0]
    with FakeChat([], failures=100) as chat:
        env = TauEnv("airline", TauConfig(user="llm", user_endpoint=_endpoint(chat.url, 2)))
        obs = env.reset(task)
        assert obs.text.startswith("User: (the user simulator is unavailable")
        assert env.last_reward.ending == "user_error" and env.last_reward.reward == 0.0
        assert env.stats == {"user_requests": 1, "user_failed_attempts": 3, "user_given_up": 1}
        _, reward, done, info = env.step("Hello?")
        assert done and reward == 0.0 and not info.valid
    with pytest.raises(EndpointUnavailable, match="3 attempts failed"):
        ChatClient(_endpoint("http://127.0.0.1:9/v1", 2)).complete([])


def test_the_judge_reads_the_conversation_and_decides_the_nl_component():
    task = next(t for t in build_tasks("retail", "base")
                if load_domain("retail").tasks[t.payload["tau_id"]]["evaluation_criteria"]
                ["nl_assertions"])
    tau = load_domain("retail").tasks[task.payload["tau_id"]]
    n = len(tau["evaluation_criteria"]["nl_assertions"])
    verdict = json.dumps({"results": [{"assertion": "a", "reasoning": "r", "met": False}] * n})
    with FakeChat([verdict, "not json"]) as chat:
        env = TauEnv("retail", TauConfig(judge_endpoint=_endpoint(chat.url)))
        for want in ({"NL_ASSERTION": 0.0}, None):
            env.reset(task)
            for action in env.expert(task):
                env.step(action)
            info = env.last_reward
            if want is None:  # an answer that is not the verdict JSON: skipped, reported
                assert info.skipped == ("NL_ASSERTION",) and info.reward == 1.0
            else:
                assert info.components["NL_ASSERTION"] == 0.0 and info.reward == 0.0
    prompt = chat.bodies[0][1]["messages"][1]["content"]
    assert "agent: " in prompt and "customer: " in prompt
    assert tau["evaluation_criteria"]["nl_assertions"][0] in prompt


@pytest.mark.parametrize("kind", sorted(set(HOSTILE_KINDS) - {"ok"}))
def test_a_hostile_user_endpoint_ends_the_episode_naming_it_within_the_timeout(kind):
    task = build_tasks("retail", "base")[0]
    with HostileServer(kind) as server:
        endpoint = EndpointConfig(base_url=server.url("/v1"), model="fake-user", retries=0,
                                  timeout_s=0.5)
        env = TauEnv("retail", TauConfig(user="llm", user_endpoint=endpoint))
        began = time.monotonic()
        obs = env.reset(task)
        elapsed = time.monotonic() - began
    assert obs.text.startswith("User: (the user simulator is unavailable: "
                               f"{server.url('/v1/chat/completions')}: 1 attempts failed; the "
                               f"last one: {server.url('/v1/chat/completions')} "), obs.text
    assert len(obs.text) < 500 and env.last_reward.ending == "user_error"
    assert elapsed < 1.5
