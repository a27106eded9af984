"""verl's agent loop plays the project's environments as the embedded collector does
(issue 17, "The agent loop").

A fake server manager answers ``generate`` with the embedded tiny model (``HFPolicy``)
and a seeded generator; the loop's per-step outputs must be the collector's steps on
the same seed. Needs verl (``AgentLoopBase``); skipped without it.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("verl.experimental.agent_loop.agent_loop",
                    reason="verl 0.9 is not importable: pip install agentcredit[verl]")

from agentcredit.config import TinyModelConfig, load_config
from agentcredit.integrations.verl import agent_loop, rows
from agentcredit.rollout.collector import RolloutCollector
from agentcredit.rollout.policy import HFPolicy
from agentcredit.train.model_loading import load_policy
from agentcredit.train.warm_start.model_bootstrap import bootstrap_tiny_model

SETTINGS = ("rollout.decoding=free", "rollout.history_window=1", "rollout.max_steps=3",
            "rollout.max_new_tokens=8", "rollout.max_prompt_tokens=900",
            "env.train_games_per_type=1", "env.valid_games_per_type=1")
ENVS = {
    "webshop": ("env=webshop",),
    "alfworld": ("env=alfworld",),
}
SEED = 11


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    texts = ["search[red shirt]", "click[buy now]", "go to countertop 1", "take egg 1",
             "You are in the middle of a room.", "Nothing happens."] * 3
    folder = bootstrap_tiny_model(texts, tmp_path_factory.mktemp("tiny"), TinyModelConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
        intermediate_size=64, max_position_embeddings=1024, seed=0))
    return load_policy(str(folder))


class FakeServerManager:
    """verl's ``LLMServerClient.generate`` answered by the embedded model on CPU."""

    def __init__(self, policy: HFPolicy, seed: int, fail: bool = False):
        self.policy, self.fail = policy, fail
        self.generator = torch.Generator().manual_seed(seed)

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        if self.fail:
            raise ConnectionError("the server went away")
        (gen,) = self.policy.generate([prompt_ids], temperature=sampling_params["temperature"],
                                      max_new_tokens=sampling_params["max_tokens"],
                                      generator=self.generator)
        return SimpleNamespace(token_ids=gen.token_ids, log_probs=gen.logprobs)


def _loop(tokenizer, server) -> agent_loop.AgentCreditLoop:
    # AgentLoopBase.__init__ wants a whole verl config; the loop reads only these
    loop = agent_loop.AgentCreditLoop.__new__(agent_loop.AgentCreditLoop)
    loop.config, loop.tokenizer, loop.server_manager = {}, tokenizer, server
    return loop


@pytest.mark.slow
@pytest.mark.parametrize("env", sorted(ENVS))
def test_the_loop_emits_the_embedded_collectors_steps_one_output_per_step(
        env, tiny_policy, monkeypatch):
    model, tokenizer = tiny_policy
    config = load_config(None, [*SETTINGS, *ENVS[env], "method=vict"])
    setup = agent_loop.RunSetup(config)
    monkeypatch.setattr(agent_loop, "run_setup", lambda *_: setup)
    policy = HFPolicy(model, tokenizer)
    for task in setup._suite.tasks("train")[:2]:
        collector = RolloutCollector(policy, setup._suite.make_env, setup.collector)
        (expected,) = collector.collect([task], 1, temperature=1.0,
                                        generator=torch.Generator().manual_seed(SEED))
        loop = _loop(tokenizer, FakeServerManager(policy, SEED))
        outputs = asyncio.run(loop.run({"temperature": 1.0}, uid="u", session_id=0,
                                       ac_task={"split": "train", "task_id": task.task_id}))
        assert len(outputs) == len(expected.steps)
        for t, (out, step) in enumerate(zip(outputs, expected.steps, strict=True)):
            assert out.prompt_ids == step.prompt_ids
            assert out.response_ids == step.response_ids
            assert out.response_logprobs == pytest.approx(step.sampling_logprobs, abs=1e-6)
            fields = out.extra_fields
            assert fields[rows.STEP] == t and fields[rows.TRAJECTORY] == "u_0"
            assert fields[rows.REWARD] == step.reward
            assert fields[rows.ANCHOR] == step.anchor_key
            assert fields[rows.SKILL] == f"{task.env}/{task.task_type}"
            assert (fields[rows.TRACE] is not None) == (t == 0)  # VICT: traced, on step 0
        trace = rows.unpack_trace(outputs[0].extra_fields[rows.TRACE], "u_0")
        assert trace.num_steps == len(expected.steps)


def test_a_rollout_whose_server_fails_is_dropped_and_counted(tiny_policy, monkeypatch):
    model, tokenizer = tiny_policy
    setup = agent_loop.RunSetup(load_config(None, [*SETTINGS, *ENVS["webshop"]]))
    monkeypatch.setattr(agent_loop, "run_setup", lambda *_: setup)
    task = setup._suite.tasks("train")[0]
    before = agent_loop.dropped_rollouts()
    loop = _loop(tokenizer, FakeServerManager(HFPolicy(model, tokenizer), SEED, fail=True))
    outputs = asyncio.run(loop.run({"temperature": 1.0}, uid="u", session_id=1,
                                   ac_task={"split": "train", "task_id": task.task_id}))
    assert outputs == []
    assert agent_loop.dropped_rollouts() == before + 1


def test_a_rollout_carries_the_span_of_weights_versions_its_server_reported():
    """verl's trainer reads ``min_global_steps`` / ``max_global_steps`` from every row."""
    versions = agent_loop.WeightVersions(sampled_at=4)
    assert versions.fields() == {"min_global_steps": 4, "max_global_steps": 4}  # none reported
    versions.saw({"global_steps": 5})
    versions.saw({"global_steps": 5, "min_global_steps": 3, "max_global_steps": 6})
    versions.saw({})
    assert versions.fields() == {"min_global_steps": 3, "max_global_steps": 6}
