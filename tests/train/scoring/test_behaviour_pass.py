"""The behaviour pass (train/scoring/behaviour_pass.py): each sampled response token's log-prob
under the model, as one plain forward over its row gives it, under both layouts."""

from __future__ import annotations

import pytest
import torch

from agentcredit.envs.base import Task
from agentcredit.rollout.prompts import PromptConfig, build_prompt_ids
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.train.model_loading import load_policy
from agentcredit.train.scoring.behaviour_pass import score_steps
from agentcredit.train.step_tensors import tensorize_steps

from ...row_oracle import row_logprobs


@pytest.fixture(scope="module")
def policy(fake_model_dir):
    return load_policy(str(fake_model_dir))


def _steps(tokenizer):
    """Two rollouts of two and three steps: each step's prompt holds the history before it."""
    task = Task("t0", "fake", "train", "take the apple", "type0")
    trajectories = []
    for length in (2, 3):
        steps, history = [], []
        for t in range(length):
            observation = f"You are in room {t}."
            action = ("go right", "take apple", "go left")[t]
            prompt = build_prompt_ids(tokenizer, task.instruction, history, observation,
                                      ("go left", "go right"), PromptConfig())
            response = tokenizer.encode(action, add_special_tokens=False) + \
                [tokenizer.eos_token_id]
            steps.append(Step(observation, action, action, True, 0.0, observation, {}, prompt,
                              response, [-1.0] * len(response)))
            history.append((observation, action))
        trajectories.append(Trajectory(task=task, group_id=0, steps=steps))
    return tensorize_steps(trajectories, tokenizer.pad_token_id)


@pytest.mark.parametrize("layout", ["trees", "rows"])
def test_each_response_token_gets_its_rows_plain_forward_log_prob_and_the_rest_zero(policy,
                                                                                      layout):
    model, tokenizer = policy
    steps = _steps(tokenizer)
    expected, _ = row_logprobs(model, steps.input_ids, steps.attention_mask,
                               score_mask=steps.loss_mask, temperature=0.7)
    scored = score_steps(model, steps, micro_batch_size=2, temperature=0.7, layout=layout)
    torch.testing.assert_close(scored, expected, atol=1e-5, rtol=0)
    assert (scored[~steps.loss_mask] == 0).all() and (scored[steps.loss_mask] < 0).all()
