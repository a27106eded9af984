"""HFPolicy: batched left-padded sampling whose log-probs are the model's, stopping at eos."""

from __future__ import annotations

import pytest
import torch

from agentcredit.rollout.collector import tensorize_steps
from agentcredit.rollout.policy import HFPolicy
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.train.models import load_policy
from agentcredit.train.scoring import token_logprobs


@pytest.fixture(scope="module")
def policy(fake_model_dir):
    model, tokenizer = load_policy(str(fake_model_dir))
    return HFPolicy(model, tokenizer)


def _prompts(tokenizer):
    return [tokenizer.encode(text, add_special_tokens=False)
            for text in ["You are in room 1.", "go left", "Nothing happens. You see an apple."]]


def test_batched_greedy_decoding_equals_one_prompt_at_a_time(policy):
    prompts = _prompts(policy.tokenizer)
    gen = torch.Generator()
    batched = policy.generate(prompts, temperature=0, max_new_tokens=6, generator=gen)
    single = [policy.generate([p], temperature=0, max_new_tokens=6, generator=gen)[0]
              for p in prompts]
    assert [g.token_ids for g in batched] == [g.token_ids for g in single]
    for b, s in zip(batched, single, strict=True):
        assert b.logprobs == pytest.approx(s.logprobs, abs=1e-4)


def test_sampling_is_reproducible_from_the_generator(policy):
    prompts = _prompts(policy.tokenizer)
    first = policy.generate(prompts, temperature=1.0, max_new_tokens=8,
                            generator=torch.Generator().manual_seed(3))
    second = policy.generate(prompts, temperature=1.0, max_new_tokens=8,
                             generator=torch.Generator().manual_seed(3))
    assert [g.token_ids for g in first] == [g.token_ids for g in second]


def test_sampling_logprobs_match_the_scored_logprobs_at_temperature_one(policy):
    prompts = _prompts(policy.tokenizer)
    gens = policy.generate(prompts, temperature=1.0, max_new_tokens=8,
                           generator=torch.Generator().manual_seed(0))
    traj = Trajectory(task=None, group_id=0, steps=[
        Step("", g.text, None, False, 0.0, "", {}, list(p), g.token_ids, g.logprobs)
        for p, g in zip(prompts, gens, strict=True)])
    steps = tensorize_steps([traj], policy.tokenizer.pad_token_id)
    scored = token_logprobs(policy.model, steps.input_ids, steps.attention_mask, 4)
    # equal up to the masked spare vocabulary rows, which hold almost no mass
    assert torch.allclose(scored[steps.loss_mask], steps.sampling_logprobs[steps.loss_mask],
                          atol=0.05)


def test_a_response_stops_at_the_first_stop_token(policy):
    gens = policy.generate(_prompts(policy.tokenizer), temperature=1.0, max_new_tokens=40,
                           generator=torch.Generator().manual_seed(1))
    for g in gens:
        stops = [i for i, t in enumerate(g.token_ids) if t in policy.stop_ids]
        assert stops == [] or stops == [len(g.token_ids) - 1]
        assert len(g.logprobs) == len(g.token_ids)
        assert all(t < len(policy.tokenizer) for t in g.token_ids)
