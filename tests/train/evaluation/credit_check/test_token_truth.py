"""The token-level truth on one-step corridor rollouts whose re-decoded continuations are scripted,
so every ``Q̂_j`` and ``τ`` is worked by hand (``FakeEnv``: 4 rooms, ``go left`` at the wall
and ``take apple`` away from the apple are invalid)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agentcredit.rollout.collector import CollectorConfig, RolloutCollector
from agentcredit.rollout.policy import Generation
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.train.evaluation.credit_check.metrics import within_rollout_rhos
from agentcredit.train.evaluation.credit_check.token_truth import (
    TokenTruth,
    chosen_steps,
    token_credit,
    token_within,
)

from ....conftest import FakeEnv
from ....corridor import corridor_distance
from .test_truths import corridor_task

PROMPT = "PROMPT"


class Scripted:
    """Continues a response head (the prompt's text after ``PROMPT``): an empty head with
    ``go right`` and ``go left`` in turn, ``go`` with `` left``, ``take`` with `` apple``."""

    def __init__(self, tokenizer):
        self.tokenizer, self.empty = tokenizer, 0

    def generate(self, prompts, *, temperature, max_new_tokens, generator, tries=None,
                 prompt_cache=None):
        out = []
        for ids in prompts:
            head = self.tokenizer.decode(ids).split(PROMPT)[-1]
            if head == "":
                text = ("go right", "go left")[self.empty % 2]
                self.empty += 1
            else:
                text = {"go": " left", "take": " apple"}[head]
            out.append(Generation(token_ids=[], logprobs=[], text=text))
        return out


def one_step(tokenizer, task, response: str) -> Trajectory:
    env = FakeEnv()
    obs = env.reset(task)
    after, _, _, info = env.step(response)
    step = Step(observation=obs.text, response=response, action=response, valid=info.valid,
                reward=0.0, anchor_key="", snapshot={},
                prompt_ids=tokenizer.encode(PROMPT, add_special_tokens=False),
                response_ids=tokenizer.encode(response, add_special_tokens=False),
                sampling_logprobs=[])
    return Trajectory(task=task, group_id=0, steps=[step], final_observation=after.text,
                      won=info.won)


def truth(tokenizer, **settings) -> TokenTruth:
    collector = RolloutCollector(Scripted(tokenizer), FakeEnv,
                                 CollectorConfig(max_steps=4, **settings))
    return TokenTruth(collector, corridor_distance, cap=20, temperature=1.0, continuations=2)


def test_token_truths_are_the_differences_of_the_prefix_values(fake_tokenizer):
    # room 0, apple in room 2: g(go right) = 0, g(go left) = -1 (the wall: invalid)
    walk = one_step(fake_tokenizer, corridor_task(0, 2), "go right")
    # room 1 with the apple: g(take apple) = 0; either move leaves it, 1 - 2 - 1 = -2
    take = one_step(fake_tokenizer, corridor_task(1, 1), "take apple")
    tau = truth(fake_tokenizer).estimate([walk, take], [(0, 0), (1, 0)])
    # walk: Q_0 = mean(0, -1) = -0.5, Q_1 = g(go left) = -1, Q_2 = 0
    assert tau[(0, 0)].tolist() == [-0.5, 1.0]
    # take: Q_0 = mean(g(go right), g(go left)) = -2; Q_1 = g(take apple) = Q_2 = 0
    assert tau[(1, 0)].tolist() == [2.0, 0.0]
    assert tau[(0, 0)].sum() == 0.0 - (-0.5)  # telescopes to g - Q_0


def test_admissible_decoding_is_refused_naming_the_setting(fake_tokenizer):
    with pytest.raises(ValueError, match="rollout.decoding=free"):
        truth(fake_tokenizer, decoding="admissible")


def test_token_within_is_the_within_step_spearman_over_tokens():
    # two steps of 3 tokens, one of 2 (too short); credit ranks step 0's tokens as the truth
    # does, step 1's in reverse
    credit = np.array([0.1, 0.2, 0.3, 0.3, 0.2, 0.1, 5.0, 1.0])
    tau = np.array([-1.0, 0.0, 2.0, -1.0, 0.0, 2.0, 1.0, 0.0])
    step = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    assert within_rollout_rhos(credit, tau, step)[:2].tolist() == [1.0, -1.0]
    assert np.isnan(within_rollout_rhos(credit, tau, step)[2])


def test_token_within_averages_steps_with_a_bootstrap_interval_over_them():
    # step (0, 0): ρ = +1 for "mixed", step (1, 0): ρ = −1; step (2, 0) has a constant τ and
    # counts for no method. Bootstrap means of two steps drawn from {+1, −1}: −1, 0 or +1
    tau = {(0, 0): np.array([-1.0, 0.0, 2.0]), (1, 0): np.array([-1.0, 0.0, 2.0]),
           (2, 0): np.zeros(3)}
    ramp, fall = np.array([0.1, 0.2, 0.3]), np.array([0.3, 0.2, 0.1])
    credit = {"mixed": {(0, 0): ramp, (1, 0): fall, (2, 0): ramp},
              "right": {(0, 0): ramp, (1, 0): ramp, (2, 0): fall},
              "flat": {k: np.ones(3) for k in tau}}
    within = token_within(credit, tau, seed=0, boots=2000)
    assert within["steps"] == 3 and within["scored_steps"] == 2
    rows = within["methods"]
    assert set(rows) == {"mixed", "right", "flat", "random"}
    assert (rows["mixed"]["value"], rows["mixed"]["low"], rows["mixed"]["high"]) == (0.0, -1.0, 1.0)
    assert (rows["right"]["value"], rows["right"]["low"], rows["right"]["high"]) == (1.0, 1.0, 1.0)
    assert (rows["flat"]["value"], rows["flat"]["low"], rows["flat"]["high"]) == (0.0, 0.0, 0.0)


def test_token_within_without_a_scored_step_reports_none():
    within = token_within({"m": {(0, 0): np.array([1.0, 2.0, 3.0])}}, {(0, 0): np.zeros(3)})
    assert within["scored_steps"] == 0
    assert within["methods"]["m"] == {"value": None, "low": None, "high": None}


def test_a_steps_token_credit_is_read_from_its_response_positions(fake_tokenizer):
    # two rollouts of one step each; step rows [S=2, L=5], responses at positions 2-3 and 1-3
    first = one_step(fake_tokenizer, corridor_task(0, 2), "go right")
    second = one_step(fake_tokenizer, corridor_task(0, 2), "go right")
    second.steps[0].response_ids = [1, 2, 3]
    rows = torch.arange(10.0).reshape(2, 5)
    mask = torch.tensor([[False, False, True, True, False], [False, True, True, True, False]])
    assert chosen_steps([first, second], 5) == [(1, 0)]  # only it has 3 tokens
    credit = token_credit([first, second], rows, mask, [(0, 0), (1, 0)])
    assert credit[(0, 0)].tolist() == [2.0, 3.0] and credit[(1, 0)].tolist() == [6.0, 7.0, 8.0]
