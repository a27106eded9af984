"""What an update prepares for credit (train/credit_inputs.py): HCAPO's hindsight pass runs on the
rollouts whose hindsight can change an advantage (``credit.hcapo.hindsight_rollouts``) and
gives the advantages of the full pass, checked against HCAPO's equations in plain Python on a
tiny model's scores."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tests.credit.hcapo_formulas import hcapo_by_the_formulas

from agentcredit.config import load_config
from agentcredit.credit.hcapo import HCAPOConfig, hcapo, hindsight_rollouts
from agentcredit.credit.hindsight import HindsightScores
from agentcredit.envs.base import Task
from agentcredit.rollout.prompts import PromptConfig, build_prompt_ids
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.train import credit_inputs
from agentcredit.train.credit_inputs import CreditInputs, hindsight_scores
from agentcredit.train.model_loading import load_policy
from agentcredit.train.ppo import score_steps
from agentcredit.train.scoring.hindsight_pass import HindsightSplicer, hindsight_logprobs
from agentcredit.train.step_tensors import credit_batch, tensorize_steps

WON, LOST = "You take the apple.", "Nothing happens."
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


def _trajectories(tokenizer, rollouts=ROLLOUTS) -> list[Trajectory]:
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


def _prepared(policy, layout, rollouts=ROLLOUTS):
    model, tokenizer = policy
    trajectories = _trajectories(tokenizer, rollouts)
    steps = tensorize_steps(trajectories, tokenizer.pad_token_id)
    old = score_steps(model, steps, MICRO, 1.0, layout)  # ℓ^b [S, L]
    return trajectories, steps, old, credit_batch(trajectories)


def test_the_rule_marks_the_rollouts_worked_out_by_hand(policy):
    *_, batch = _prepared(policy, "trees")
    assert hindsight_rollouts(batch).tolist() == [read for *_, read in ROLLOUTS]


@pytest.mark.parametrize("layout", ["trees", "rows"])
def test_hcapo_on_the_rows_the_pass_scored_gives_the_advantages_of_the_full_pass(policy, layout):
    model, tokenizer = policy
    trajectories, steps, old, batch = _prepared(policy, layout)
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
    trajectories, steps, old, batch = _prepared(policy, "trees")
    seen = []

    def recording(model, splicer, trajectories, steps, **kwargs):
        seen.append(([t.final_observation for t in trajectories], steps.input_ids.shape[0]))
        return hindsight_logprobs(model, splicer, trajectories, steps, **kwargs)
    monkeypatch.setattr(credit_inputs, "hindsight_logprobs", recording)
    scores = hindsight_scores(model, HindsightSplicer(tokenizer), trajectories, steps, batch,
                              old, micro_batch_size=MICRO, temperature=1.0, layout="trees")
    read = [r for r in ROLLOUTS if r[3]]
    assert seen == [([final for _, _, final, _ in read], sum(len(r[1]) for r in read))]
    rows = hindsight_rollouts(batch)[batch.step_rollout]
    assert torch.equal(scores.hindsight[~rows], scores.behaviour[~rows])  # ρ = 1 there
    assert (scores.hindsight[rows] != scores.behaviour[rows]).all()


def test_a_batch_without_a_rollout_to_read_runs_no_pass(policy, monkeypatch):
    model, tokenizer = policy
    trajectories, steps, old, batch = _prepared(policy, "trees", [r for r in ROLLOUTS
                                                                  if not r[3]])
    monkeypatch.setattr(credit_inputs, "hindsight_logprobs", None)  # a call would fail
    scores = hindsight_scores(model, HindsightSplicer(tokenizer), trajectories, steps, batch,
                              old, micro_batch_size=MICRO, temperature=1.0, layout="trees")
    assert torch.equal(scores.hindsight, scores.behaviour)


def test_the_update_chooses_the_rows_on_the_shaped_rewards(policy, tiny_fake_run, fake_suite):
    # a buffer of one token: DAPO's overlong penalty falls on every response of 2+ tokens, so
    # the failed rollouts without a reward are read too
    model, tokenizer = policy
    config = load_config(None, [*tiny_fake_run, "method=hcapo", "rollout.max_new_tokens=2",
                                "rollout.overlong_buffer=0.5",
                                f"optim.score_micro_batch_size={MICRO}"])
    trajectories, steps, old, _ = _prepared(policy, config.optim.layout)
    prepared = CreditInputs(config, fake_suite(), tokenizer, None).prepare(
        model, trajectories, steps, old, None, update=1)
    multi_step = [len(r[1]) >= 2 for r in ROLLOUTS]
    assert hindsight_rollouts(prepared.batch).tolist() == multi_step
    rows = hindsight_rollouts(prepared.batch)[prepared.batch.step_rollout]
    scores = prepared.batch.hindsight
    assert (scores.hindsight[rows] != scores.behaviour[rows]).all()  # scored, not left at ℓ^b
    lengths = [len(r[1]) for r in ROLLOUTS]
    assert prepared.metrics["score/hindsight_row_share"] == pytest.approx(
        sum(n for n, m in zip(lengths, multi_step, strict=True) if m) / sum(lengths))
    assert "hindsight" in prepared.seconds
