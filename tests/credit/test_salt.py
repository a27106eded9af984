"""SALT (credit/salt.py) on hand-built groups: the node mean of the trajectory graph, with the
expected advantages worked out by hand from the RLOO and Dr.GRPO backbones."""

from __future__ import annotations

import pytest
import torch

from agentcredit.credit import CreditBatch, get_estimator
from agentcredit.credit.grpo import GRPOConfig
from agentcredit.credit.rloo import RLOOConfig
from agentcredit.credit.salt import SALTConfig, salt

RLOO = SALTConfig(backbone=RLOOConfig())


def _batch(rewards, groups, states, actions) -> CreditBatch:
    return CreditBatch.from_lists(rewards, groups, states, action_keys=actions, dtype=torch.float64)


def test_salt_gives_a_shared_prefix_the_node_mean_and_divergent_steps_their_own():
    # r0 and r1 both open with (s0, go, s1), then diverge; r2 never meets them.
    batch = _batch([[0, 10], [0, 0, 0], [0, 0]], [0, 0, 0],
                   [["s0", "s1"], ["s0", "s1", "s2"], ["s0", "s3"]],
                   [["go", "take"], ["go", "look", "wait"], ["open", "go"]])
    # RLOO: A_i = R_i − mean of the others: 10 − 0, 0 − 5, 0 − 5
    a0, a1, a2 = 10.0, -5.0, -5.0
    shared = (a0 + a1) / 2  # node (s0, go, s1) = 2.5
    expected = [shared, a0, shared, a1, a1, a2, a2]
    assert salt(batch, RLOO).step_advantages.tolist() == pytest.approx(expected)


def test_salt_on_dr_grpo_averages_the_centred_returns_of_the_rollouts_through_a_node():
    batch = _batch([[0, 10], [0, 0, 0], [0, 0]], [0, 0, 0],
                   [["s0", "s1"], ["s0", "s1", "s2"], ["s0", "s3"]],
                   [["go", "take"], ["go", "look", "wait"], ["open", "go"]])
    # Dr.GRPO: R_i − μ with μ = 10/3
    a0, a1, a2 = 10 - 10 / 3, -10 / 3, -10 / 3
    expected = [(a0 + a1) / 2, a0, (a0 + a1) / 2, a1, a1, a2, a2]
    result = salt(batch, SALTConfig(backbone=GRPOConfig(norm_by_std=False)))
    assert result.step_advantages.tolist() == pytest.approx(expected)
    assert result.extras["episode_advantage"].tolist() == pytest.approx([a0, a1, a2])
    assert result.diagnostics["shared_node_step_share"] == pytest.approx(2 / 7)


def test_a_rollout_that_loops_through_a_node_counts_once_in_its_mean():
    # r0 takes (s0, go, s1) twice (a loop back to s0); r1 takes it once.
    batch = _batch([[0, 0, 0, 10], [0, 0], [0, 4]], [0, 0, 0],
                   [["s0", "s1", "s0", "s1"], ["s0", "s1"], ["s2", "s3"]],
                   [["go", "back", "go", "take"], ["go", "x"], ["y", "z"]])
    a0, a1, a2 = 10 - 2.0, 0 - 7.0, 4 - 5.0  # RLOO with R = 10, 0, 4
    per_rollout = (a0 + a1) / 2  # 0.5; per visit it would be (2·a0 + a1)/3 = 3
    got = salt(batch, RLOO).step_advantages.tolist()
    assert got == pytest.approx([per_rollout, a0, per_rollout, a0, per_rollout, a1, a2, a2])


def test_the_same_transition_in_two_groups_is_two_nodes():
    batch = _batch([[10], [0], [10], [4]], [0, 0, 1, 1],
                   [["s0"], ["s0"], ["s0"], ["s0"]], [["go"], ["go"], ["go"], ["go"]])
    # each group's two rollouts share their node; RLOO: group 0 (10, −10), group 1 (6, −6)
    assert salt(batch, RLOO).step_advantages.tolist() == pytest.approx([0.0, 0.0, 0.0, 0.0])
    batch = _batch([[10], [0]], [0, 1], [["s0"], ["s0"]], [["go"], ["go"]])
    assert salt(batch, RLOO).diagnostics["shared_node_step_share"] == 0.0


def test_a_last_step_merges_only_with_last_steps_that_took_the_same_action():
    batch = _batch([[10], [0, 0], [0]], [0, 0, 0], [["s0"], ["s0", "s1"], ["s0"]],
                   [["take"], ["take", "x"], ["take"]])
    # (s0, take, END) is r0's and r2's step; r1's (s0, take, s1) continues
    a0, a1, a2 = 10 - 0.0, 0 - 5.0, 0 - 5.0
    assert salt(batch, RLOO).step_advantages.tolist() == pytest.approx(
        [(a0 + a2) / 2, a1, a1, (a0 + a2) / 2])


def test_without_a_shared_node_salt_is_its_backbone():
    batch = _batch([[0, 10], [0, 0]], [0, 0], [["a", "b"], ["c", "d"]], [["x", "y"], ["x", "y"]])
    grpo = get_estimator("grpo")(batch)
    assert torch.equal(salt(batch, SALTConfig()).step_advantages, grpo.step_advantages)


def test_salt_without_action_keys_says_how_to_record_them():
    batch = CreditBatch.from_lists([[1.0]], [0])
    with pytest.raises(ValueError, match="action_keys"):
        salt(batch, SALTConfig())
