"""HCAPO's hindsight pass (train/scoring/hindsight_pass.py): the ADRS teacher pass with the
rollout's final observation where the skill goes, and the per-step means HCAPO reads."""

from __future__ import annotations

import pytest
import torch

from agentcredit.credit.hindsight import HindsightScores
from agentcredit.envs.base import Task
from agentcredit.rollout.prompts import PromptConfig, build_prompt_ids
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.train.model_loading import load_policy
from agentcredit.train.scoring.hindsight_pass import (
    HindsightSplicer,
    hindsight_logprobs,
    hindsight_prefix,
)
from agentcredit.train.step_tensors import tensorize_steps

from ...row_oracle import row_logprobs

FINALS = ("You take the apple.", "Nothing happens.")


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
