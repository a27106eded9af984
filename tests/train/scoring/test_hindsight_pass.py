"""HCAPO's hindsight pass (train/scoring/hindsight_pass.py): the ADRS teacher pass with the
rollout's final observation where the skill goes, and the per-step means HCAPO reads; run by
each update on the rollouts whose hindsight can change an advantage
(``credit.hcapo.hindsight_rollouts``) only, it gives the advantages of the full pass, checked
against HCAPO's equations in plain Python on a tiny model's scores."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tests.credit.hcapo_formulas import hcapo_by_the_formulas

from agentcredit.credit.hcapo import HCAPOConfig, hcapo, hindsight_rollouts
from agentcredit.credit.hindsight import HindsightScores
from agentcredit.envs.base import Task
from agentcredit.rollout.prompts import PromptConfig, build_prompt_ids
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.train.model_loading import load_policy
from agentcredit.train.scoring import hindsight_pass
from agentcredit.train.scoring.behaviour_pass import score_steps
from agentcredit.train.scoring.hindsight_pass import (
    HindsightSplicer,
    hindsight_logprobs,
    hindsight_prefix,
    hindsight_scores,
)
from agentcredit.train.step_tensors import credit_batch, tensorize_steps

from ...row_oracle import row_logprobs

WON, LOST = "You take the apple.", "Nothing happens."
FINALS = (WON, LOST)
ACTIONS = ("go right", "take apple", "go left")
#: (group, step rewards, final observation) of each rollout, and whether HCAPO reads its hindsight
ROLLOUTS = (
    (0, [0.0, 0.0, 10.0], WON, True),
    (0, [0.0, 0.0, 0.0], LOST, False),  # every reward 0: G ≡ 0, so Q^H ≡ 0
    (0, [-0.1, 0.0], LOST, True),  # a penalty makes G ≠ 0
    (0, [10.0], WON, False),  # one step: ρ̃ = clip(ρ / ρ) = 1
    (1, [0.0, 0.0], LOST, False),  # a group without a reward reads nothing
    (1, [0.0, 0.0, 0.0], LOST, False),
    (2, [0.0, 10.0], WON, True),  # equal returns, yet Q^H varies with ρ̃
    (2, [0.0, 0.0, 10.0], WON, True),
)
MICRO = 3


@pytest.fixture(scope="module")
def policy(fake_model_dir):
    return load_policy(str(fake_model_dir))


@pytest.fixture(scope="module")
def trajectories(policy) -> list[Trajectory]:
    """Two rollouts of one task with the same steps but different final observations."""
    _, tokenizer = policy
    task = Task("t0", "fake", "train", "take the apple", "type0")
    out = []
    for final in FINALS:
        steps, history = [], []
        for t, action in enumerate(("go right", "take apple")):
            observation = f"You are in room {t}. The room is empty."
            prompt = build_prompt_ids(tokenizer, task.instruction, history, observation,
                                      ("go left", "go right"), PromptConfig())
            response = tokenizer.encode(action, add_special_tokens=False) + \
                [tokenizer.eos_token_id]
            steps.append(Step(observation, action, action, True, 0.0, observation, {}, prompt,
                              response, [-1.0] * len(response)))
            history.append((observation, action))
        out.append(Trajectory(task=task, group_id=0, steps=steps, final_observation=final))
    return out


def _hindsight(policy, trajectories, micro_batch_size=3):
    model, tokenizer = policy
    steps = tensorize_steps(trajectories, tokenizer.pad_token_id)
    return steps, hindsight_logprobs(model, HindsightSplicer(tokenizer), trajectories, steps,
                                     micro_batch_size=micro_batch_size)


def test_hindsight_scores_are_ordinary_scores_with_the_final_observation_in_the_user_turn(
        policy, trajectories):
    model, tokenizer = policy
    steps, scores = _hindsight(policy, trajectories)
    finals = [t.final_observation for t in trajectories for _ in t.steps]
    for row in range(steps.input_ids.shape[0]):
        response = steps.loss_mask[row].nonzero().flatten()
        first, last = int(response[0]), int(response[-1])
        prompt = tokenizer.decode(steps.input_ids[row, :first])
        header = "Your task is to: take the apple"
        assert prompt.count(header) == 1
        spliced = HindsightSplicer(tokenizer).privileged_prompt_ids(
            steps.input_ids[row, :first].tolist(), finals[row])
        # the prefix sits at the start of the user message, right before the task line
        assert tokenizer.decode(spliced).replace(hindsight_prefix(finals[row]), "", 1) == prompt
        assert hindsight_prefix(finals[row]) + header in tokenizer.decode(spliced)
        sequence = spliced + steps.input_ids[row, first:last + 1].tolist()
        expected = row_logprobs(model, torch.tensor([sequence]),
                                torch.ones(1, len(sequence), dtype=torch.long))[0][0]
        assert torch.allclose(scores[row, first:last + 1], expected[-(last + 1 - first):],
                              atol=1e-4)
    assert (scores[~steps.loss_mask] == 0).all()


def test_each_rollout_is_rescored_with_its_own_final_observation(policy, trajectories):
    steps, scores = _hindsight(policy, trajectories)
    half = steps.input_ids.shape[0] // 2  # same prompts and responses, different outcomes
    assert torch.equal(steps.input_ids[:half], steps.input_ids[half:])
    assert (scores[:half] - scores[half:])[steps.loss_mask[:half]].abs().max() > 1e-4
    _, one_by_one = _hindsight(policy, trajectories, micro_batch_size=1)
    assert torch.allclose(scores, one_by_one, atol=1e-4)


def test_hindsight_scores_average_each_steps_response_tokens():
    mask = torch.tensor([[0, 1, 1, 0], [0, 0, 1, 1]], dtype=torch.bool)
    hindsight = torch.tensor([[9.0, -1.0, -3.0, 9.0], [9.0, 9.0, -0.5, -1.5]])
    behaviour = torch.tensor([[9.0, -2.0, -2.0, 9.0], [9.0, 9.0, -4.0, 0.0]])
    scores = HindsightScores.from_step_rows(mask, hindsight, behaviour)
    assert scores.hindsight.tolist() == pytest.approx([-2.0, -1.0])
    assert scores.behaviour.tolist() == pytest.approx([-2.0, -2.0])


# THE PASS ON THE ROWS HCAPO READS


def hcapo_trajectories(tokenizer, rollouts=ROLLOUTS) -> list[Trajectory]:
    """One trajectory per ``rollouts`` entry, one task, varied actions."""
    task = Task("t0", "fake", "train", "take the apple", "type0")
    out = []
    for i, (group, rewards, final, _) in enumerate(rollouts):
        steps, history = [], []
        for t, reward in enumerate(rewards):
            observation = f"You are in room {t}. The room is empty."
            action = ACTIONS[(i + t) % len(ACTIONS)]
            prompt = build_prompt_ids(tokenizer, task.instruction, history, observation,
                                      ("go left", "go right"), PromptConfig())
            response = tokenizer.encode(action, add_special_tokens=False) + \
                [tokenizer.eos_token_id]
            steps.append(Step(observation, action, action, True, reward, observation, {},
                              prompt, response, [-1.0] * len(response)))
            history.append((observation, action))
        out.append(Trajectory(task=task, group_id=group, steps=steps, final_observation=final))
    return out


def hcapo_inputs(policy, layout, rollouts=ROLLOUTS):
    """``(trajectories, steps, ℓ^b [S, L], credit batch)`` of ``rollouts`` under ``policy``."""
    model, tokenizer = policy
    trajectories = hcapo_trajectories(tokenizer, rollouts)
    steps = tensorize_steps(trajectories, tokenizer.pad_token_id)
    old = score_steps(model, steps, MICRO, 1.0, layout)  # ℓ^b [S, L]
    return trajectories, steps, old, credit_batch(trajectories)


def test_the_rule_marks_the_rollouts_worked_out_by_hand(policy):
    *_, batch = hcapo_inputs(policy, "trees")
    assert hindsight_rollouts(batch).tolist() == [read for *_, read in ROLLOUTS]


@pytest.mark.parametrize("layout", ["trees", "rows"])
def test_hcapo_on_the_rows_the_pass_scored_gives_the_advantages_of_the_full_pass(policy, layout):
    model, tokenizer = policy
    trajectories, steps, old, batch = hcapo_inputs(policy, layout)
    splicer = HindsightSplicer(tokenizer)
    full = HindsightScores.from_step_rows(steps.loss_mask, hindsight_logprobs(
        model, splicer, trajectories, steps, micro_batch_size=MICRO, layout=layout), old)
    scored = hindsight_scores(model, splicer, trajectories, steps, batch, old,
                              micro_batch_size=MICRO, temperature=1.0, layout=layout)
    # the equations on the full pass's ratios, every rollout's read
    log_ratio = ((full.hindsight - full.behaviour) / HCAPOConfig().temperature).double().exp()
    ratios, rewards, start = [], batch.step_rewards.tolist(), 0
    per_rollout = []
    for length in batch.episode_lengths.tolist():
        ratios.append(log_ratio[start:start + length].tolist())
        per_rollout.append(rewards[start:start + length])
        start += length
    groups = batch.group_index.tolist()
    expected = hcapo_by_the_formulas(per_rollout, groups, ratios)
    got = hcapo(dataclasses.replace(batch, hindsight=scored), HCAPOConfig()).step_advantages
    assert got.tolist() == pytest.approx(expected, abs=1e-6)
    # the batch's hindsight moves advantages, so a rollout skipped wrongly would show
    neutral = hcapo_by_the_formulas(per_rollout, groups, [[1.0] * len(r) for r in ratios])
    assert max(abs(a - b) for a, b in zip(expected, neutral, strict=True)) > 1e-3
    on_full = hcapo(dataclasses.replace(batch, hindsight=full), HCAPOConfig()).step_advantages
    assert torch.allclose(got, on_full, atol=1e-6, rtol=0)


def test_the_pass_scores_only_the_rollouts_hcapo_reads_and_leaves_the_rest_at_the_old_scores(
        policy, monkeypatch):
    model, tokenizer = policy
    trajectories, steps, old, batch = hcapo_inputs(policy, "trees")
    seen = []

    def recording(model, splicer, trajectories, steps, **kwargs):
        seen.append(([t.final_observation for t in trajectories], steps.input_ids.shape[0]))
        return hindsight_logprobs(model, splicer, trajectories, steps, **kwargs)
    monkeypatch.setattr(hindsight_pass, "hindsight_logprobs", recording)
    scores = hindsight_scores(model, HindsightSplicer(tokenizer), trajectories, steps, batch,
                              old, micro_batch_size=MICRO, temperature=1.0, layout="trees")
    read = [r for r in ROLLOUTS if r[3]]
    assert seen == [([final for _, _, final, _ in read], sum(len(r[1]) for r in read))]
    rows = hindsight_rollouts(batch)[batch.step_rollout]
    assert torch.equal(scores.hindsight[~rows], scores.behaviour[~rows])  # ρ = 1 there
    assert (scores.hindsight[rows] != scores.behaviour[rows]).all()


def test_a_batch_without_a_rollout_to_read_runs_no_pass(policy, monkeypatch):
    model, tokenizer = policy
    trajectories, steps, old, batch = hcapo_inputs(policy, "trees", [r for r in ROLLOUTS
                                                                     if not r[3]])
    monkeypatch.setattr(hindsight_pass, "hindsight_logprobs", None)  # a call would fail
    scores = hindsight_scores(model, HindsightSplicer(tokenizer), trajectories, steps, batch,
                              old, micro_batch_size=MICRO, temperature=1.0, layout="trees")
    assert torch.equal(scores.hindsight, scores.behaviour)
