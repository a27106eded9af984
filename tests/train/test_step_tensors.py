"""A batch's steps as the embedded trainer reads them (train/step_tensors.py): step rows with
loss on response tokens only, the credit batch in the same flat step order, and the write-back
of a ``CreditResult`` to the response tokens (``CreditResult.per_token``)."""

from __future__ import annotations

import pytest
import torch

from agentcredit.credit import CreditResult
from agentcredit.envs.base import Task
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.train.scoring.tree_forward import Rows
from agentcredit.train.step_tensors import credit_batch, tensorize_steps

PAD = 0


def _step(prompt: list[int], response: list[int], reward: float = 0.0, action="go",
          allowed=None) -> Step:
    return Step(observation=f"obs {prompt[0]}", response="go", action=action, valid=True,
                reward=reward, anchor_key=f"obs {prompt[0]}", snapshot={}, prompt_ids=prompt,
                response_ids=response, sampling_logprobs=[-0.5 - i for i in range(len(response))],
                allowed_ids=allowed)


def _trajectories() -> list[Trajectory]:
    """Two groups: rollouts of ragged prompts and responses, one response unparsed."""
    task = Task("t0", "fake", "train", "take the apple", "type0")
    return [
        Trajectory(task=task, group_id=7, steps=[_step([5, 6, 7], [8, 9]),
                                                 _step([5, 6, 7, 8, 9, 10], [11], reward=1.0)]),
        Trajectory(task=task, group_id=7, steps=[_step([5], [12, 13, 14], reward=-0.1,
                                                       action=None)]),
        Trajectory(task=task, group_id=8, steps=[_step([3, 4], [15], reward=1.0)]),
    ]


def test_no_prompt_or_padding_token_gets_loss():
    trajectories = _trajectories()
    steps = tensorize_steps(trajectories, PAD)
    flat = [s for t in trajectories for s in t.steps]
    assert steps.input_ids.shape == (len(flat), 7)
    for row, step in enumerate(flat):
        p, n = len(step.prompt_ids), len(step.response_ids)
        mask = steps.loss_mask[row]
        assert mask.nonzero().flatten().tolist() == list(range(p, p + n))
        assert steps.input_ids[row, mask].tolist() == step.response_ids
        assert steps.input_ids[row, :p].tolist() == step.prompt_ids
        assert (steps.input_ids[row, p + n:] == PAD).all()
        assert steps.attention_mask[row].sum() == p + n
        assert steps.sampling_logprobs[row, mask].tolist() == step.sampling_logprobs
        assert (steps.sampling_logprobs[row, ~mask] == 0).all()
    assert steps.num_response_tokens == sum(len(s.response_ids) for s in flat)
    assert steps.allowed is None


def test_the_step_rows_are_the_rows_every_scoring_forward_takes_with_the_responses_scored():
    steps = tensorize_steps(_trajectories(), PAD)
    assert isinstance(steps, Rows)  # no conversion between the update and the forward
    assert steps.loss_mask.sum() == 2 + 1 + 3 + 1  # the responses, the tokens a forward scores


def test_a_selection_of_step_rows_keeps_every_tensor_of_those_rows_in_flat_order():
    steps = tensorize_steps(_trajectories(), PAD)
    chosen = steps.select(torch.tensor([False, True, True, False]))
    assert chosen.step_rollout.tolist() == [0, 1]  # rollout 0's second step, rollout 1's step
    assert chosen.input_ids.tolist() == steps.input_ids[1:3].tolist()
    assert chosen.loss_mask.tolist() == steps.loss_mask[1:3].tolist()
    assert chosen.sampling_logprobs.tolist() == steps.sampling_logprobs[1:3].tolist()
    assert chosen.allowed is None


def test_allowed_sets_land_on_their_response_tokens():
    task = Task("t0", "fake", "train", "take the apple", "type0")
    steps = tensorize_steps([Trajectory(task=task, group_id=0, steps=[
        _step([5, 6], [8, 9], allowed=[[8, 3], [9]]), _step([5], [4])])], PAD)
    assert steps.allowed.shape == (2, 4, 2)
    assert steps.allowed[0, 2].tolist() == [8, 3] and steps.allowed[0, 3].tolist() == [9, -1]
    assert (steps.allowed[0, :2] == -1).all() and (steps.allowed[1] == -1).all()


def test_the_credit_batch_lists_the_steps_in_the_rows_order():
    trajectories = _trajectories()
    batch = credit_batch(trajectories)
    flat = [s for t in trajectories for s in t.steps]
    assert batch.num_steps == len(flat)
    assert batch.step_rewards.tolist() == pytest.approx([s.reward for s in flat])
    assert batch.anchor_keys == tuple(s.observation for s in flat)
    # the action the environment got: the raw response where none parsed
    assert batch.action_keys == ("go", "go", "go", "go")
    assert batch.group_ids.tolist() == [7, 7, 8]
    assert torch.equal(tensorize_steps(trajectories, PAD).step_rollout, batch.step_rollout)


def test_a_step_advantage_is_written_to_its_response_tokens_only():
    steps = tensorize_steps(_trajectories(), PAD)
    values = torch.arange(1.0, steps.input_ids.shape[0] + 1)
    tokens = CreditResult(step_advantages=values).per_token(steps.loss_mask)
    assert tokens.dtype == torch.float32
    assert (tokens[~steps.loss_mask] == 0).all()
    assert torch.equal(tokens.sum(1), values * steps.loss_mask.sum(1))


def test_token_advantages_are_written_to_their_tokens_in_flat_order():
    steps = tensorize_steps(_trajectories(), PAD)
    count = steps.num_response_tokens
    token = torch.arange(1.0, count + 1, dtype=torch.float64)
    result = CreditResult(step_advantages=torch.zeros(steps.input_ids.shape[0]),
                          token_advantages=token)
    tokens = result.per_token(steps.loss_mask)
    assert tokens.dtype == torch.float32
    assert tokens[steps.loss_mask].tolist() == token.tolist()
    assert (tokens[~steps.loss_mask] == 0).all()
