"""HCAPO (credit/hcapo.py) on hand-built groups: the hindsight ratio, its clip, the group z-score
of Q^H, the rule that no step of a successful rollout is pushed below 0, and which rollouts'
hindsight can change an advantage. Expected values are worked out in each test with plain
arithmetic, or by the equations in plain Python (hcapo_formulas.py)."""

from __future__ import annotations

import dataclasses
import math
from statistics import fmean, pstdev

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.credit.hcapo_formulas import hcapo_by_the_formulas

from agentcredit.credit import CreditBatch
from agentcredit.credit.hcapo import HCAPOConfig, hcapo, hindsight_rollouts
from agentcredit.credit.hindsight import HindsightScores

EPS = 1e-6


def _batch(rewards, ratios, temperature=5.0, groups=None) -> CreditBatch:
    """A batch (one group unless ``groups``) whose raw hindsight ratios are ``ratios`` (per
    rollout, per step): ``m^b = 0`` and ``m^H = T · ln ρ``."""
    groups = [0] * len(rewards) if groups is None else groups
    batch = CreditBatch.from_lists(rewards, groups, dtype=torch.float64)
    flat = [r for rollout in ratios for r in rollout]
    hindsight = HindsightScores(hindsight=torch.tensor([temperature * math.log(r) for r in flat],
                                                       dtype=torch.float64),
                                behaviour=torch.zeros(len(flat), dtype=torch.float64))
    return dataclasses.replace(batch, hindsight=hindsight)


def _z(values: list[float]) -> list[float]:
    mu, sigma = fmean(values), pstdev(values)
    return [(v - mu) / (sigma + EPS) for v in values]


def test_hcapo_clips_the_normalised_ratio_and_adds_the_z_score_of_q_to_grpo():
    # success [0, 10] with raw ratios 2 and 0.5; failure [0, 0] with ratio 1 throughout
    batch = _batch([[0, 10], [0, 0]], [[2.0, 0.5], [1.0, 1.0]])
    # ρ / mean_t ρ: 2/1.25 = 1.6 → clipped 1.2; 0.5/1.25 = 0.4 → clipped 0.8; failure 1, 1
    ratio = [1.2, 0.8, 1.0, 1.0]
    g = [0.95 * 10, 10.0, 0.0, 0.0]  # return-to-go, γ = 0.95
    q = [r * v for r, v in zip(ratio, g, strict=True)]  # 11.4, 8.0, 0, 0
    z = _z(q)
    macro = [5 / (5 + EPS), -5 / (5 + EPS)]  # GRPO on returns 10, 0
    expected = [macro[0] + z[0], macro[0] + z[1], macro[1] + z[2], macro[1] + z[3]]
    result = hcapo(batch, HCAPOConfig())
    assert result.step_advantages.tolist() == pytest.approx(expected, rel=1e-9)
    assert result.extras["hindsight_ratio"].tolist() == pytest.approx(ratio)
    assert result.diagnostics["ratio_clipped_share"] == pytest.approx(0.5)


def test_the_normalised_ratio_never_leaves_the_clip_range():
    batch = _batch([[0, 0, 10], [0, 1]], [[50.0, 1e-3, 1.0], [3.0, 0.2]])
    ratio = hcapo(batch, HCAPOConfig()).extras["hindsight_ratio"]
    assert ratio.min() >= 0.8 and ratio.max() <= 1.2
    assert ratio.tolist() == pytest.approx([1.2, 0.8, 0.8, 1.2, 0.8])


def test_no_step_of_a_successful_rollout_is_negative_while_failures_keep_theirs():
    # γ = 0.5, ρ ≡ 1 so Q^H = G: the long success's first step sits below the group mean
    batch = _batch([[0, 0, 0, 10], [0, 10], [0, 0]], [[1.0] * 4, [1.0] * 2, [1.0] * 2])
    g = [1.25, 2.5, 5.0, 10.0, 5.0, 10.0, 0.0, 0.0]
    z = _z(g)
    returns = [10.0, 10.0, 0.0]
    macro = _z(returns)
    rollout = [0, 0, 0, 0, 1, 1, 2, 2]
    combined = [macro[i] + zs for i, zs in zip(rollout, z, strict=True)]
    assert combined[0] < 0 < combined[1]  # the hand-built case the rule is about
    expected = [max(c, 0.0) if returns[i] > 0 else c
                for i, c in zip(rollout, combined, strict=True)]
    result = hcapo(batch, HCAPOConfig(gamma=0.5))
    assert result.step_advantages.tolist() == pytest.approx(expected, rel=1e-9)
    assert result.step_advantages[0] == 0.0
    assert (result.step_advantages[6:] < 0).all()  # failures are not lifted
    assert result.diagnostics["success_zeroed_share"] == pytest.approx(1 / 8)


def test_a_ratio_of_one_leaves_the_step_term_the_group_z_score_of_the_return_to_go():
    batch = _batch([[0, 10], [0, 0], [-0.1, 0]], [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    g = [9.5, 10.0, 0.0, 0.0, -0.1, 0.0]
    macro = _z([10.0, 0.0, -0.1])
    rollout = [0, 0, 1, 1, 2, 2]
    expected = [macro[i] + zs for i, zs in zip(rollout, _z(g), strict=True)]
    expected = [max(e, 0.0) if i == 0 else e for i, e in zip(rollout, expected, strict=True)]
    got = hcapo(batch, HCAPOConfig()).step_advantages.tolist()
    assert got == pytest.approx(expected, rel=1e-9)


def test_hcapo_without_hindsight_scores_says_where_they_come_from():
    with pytest.raises(ValueError, match="hindsight"):
        hcapo(CreditBatch.from_lists([[1.0]], [0]), HCAPOConfig())
    with pytest.raises(ValueError, match="ratio_clip_low"):
        HCAPOConfig(ratio_clip_low=1.3)


def test_hindsight_is_read_only_on_rollouts_with_two_steps_and_a_non_zero_reward():
    rewards = [[0, 0, 0], [0, 0],  # all failed without a penalty: equal returns, nothing read
               [0, 10], [0, 0, 10],  # all won, equal returns: both read
               [0, 0], [-0.1, 0], [10], [0.1, -0.1]]  # G ≡ 0, a penalty, one step, return 0
    groups = [0, 0, 1, 1, 2, 2, 2, 2]
    batch = CreditBatch.from_lists(rewards, groups)
    assert hindsight_rollouts(batch).tolist() == [False, False, True, True,
                                                  False, True, False, True]


def test_equal_returns_leave_the_hindsight_of_rewarded_rollouts_in_the_advantage():
    # both won with return 10, so A^GRPO = 0, yet the z-score of Q^H still follows ρ̃
    rewards = [[0, 10], [0, 10]]
    neutral = hcapo(_batch(rewards, [[1.0, 1.0], [1.0, 1.0]]), HCAPOConfig()).step_advantages
    tilted = hcapo(_batch(rewards, [[1.2, 0.9], [1.0, 1.0]]), HCAPOConfig()).step_advantages
    # ρ ≡ 1: Q^H = G = 9.5, 10 in each rollout; both succeeded, so negatives are lifted to 0
    assert neutral.tolist() == pytest.approx([max(z, 0.0) for z in _z([9.5, 10.0, 9.5, 10.0])])
    assert (neutral - tilted).abs().max() > 0.1


@st.composite
def _groups(draw) -> tuple[list[list[float]], list[int], list[list[float]]]:
    """Rewards, group ids and log-ratios ``ln ρ`` of up to 3 groups of up to 4 rollouts."""
    rewards, groups, log_ratios = [], [], []
    for group in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 4))):
            steps = draw(st.integers(1, 4))
            rewards.append(draw(st.lists(st.sampled_from([0.0, 0.0, 0.0, -0.1, 1.0, 10.0]),
                                         min_size=steps, max_size=steps)))
            log_ratios.append(draw(st.lists(st.floats(-3.0, 3.0), min_size=steps,
                                            max_size=steps)))
            groups.append(group)
    return rewards, groups, log_ratios


@settings(max_examples=80, deadline=None)
@given(_groups(), st.integers(0, 2**31 - 1))
def test_the_rollouts_hindsight_rollouts_leaves_out_change_no_advantage(drawn, seed):
    rewards, groups, log_ratios = drawn
    batch = _batch(rewards, [[math.exp(x) for x in r] for r in log_ratios], groups=groups)
    result = hcapo(batch, HCAPOConfig())
    # the equations read every rollout's ratio, the rule or not
    expected = hcapo_by_the_formulas(rewards, groups, [[math.exp(x) for x in r]
                                                       for r in log_ratios])
    assert result.step_advantages.tolist() == pytest.approx(expected, rel=1e-6, abs=1e-6)
    # any other score on the rollouts left out gives the same result, bit for bit
    left_out = ~hindsight_rollouts(batch)[batch.step_rollout]
    noise = torch.randn(left_out.shape, dtype=torch.float64,
                        generator=torch.Generator().manual_seed(seed)) * 5
    other = dataclasses.replace(batch, hindsight=HindsightScores(
        hindsight=torch.where(left_out, noise, batch.hindsight.hindsight),
        behaviour=batch.hindsight.behaviour))
    again = hcapo(other, HCAPOConfig())
    assert torch.equal(again.step_advantages, result.step_advantages)
    assert again.diagnostics == result.diagnostics

