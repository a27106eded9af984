import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcredit.credit import CreditBatch
from agentcredit.credit.grpo import GRPOConfig, group_std, grpo


def _single_step_batch(groups: list[list[float]], dtype=torch.float32) -> CreditBatch:
    rewards = [[r] for group in groups for r in group]
    group_ids = [g for g, group in enumerate(groups) for _ in group]
    return CreditBatch.from_lists(rewards, group_ids, dtype=dtype)


def test_grpo_gives_plus_minus_one_for_two_winners_and_two_losers():
    # mean 5, population std 5: (10 − 5) / (5 + 1e-6) ≈ 1
    adv = grpo(_single_step_batch([[10, 0, 0, 10]]), GRPOConfig()).step_advantages
    expected = 5 / (5 + 1e-6)
    assert torch.allclose(adv, torch.tensor([expected, -expected, -expected, expected]))


def test_grpo_normalises_each_group_with_its_own_mean_and_population_std():
    adv = grpo(_single_step_batch([[10, 0, 0, 10], [1, 2, 3]]), GRPOConfig()).step_advantages
    std = math.sqrt(2 / 3)  # population std of 1, 2, 3
    expected = [1, -1, -1, 1, -1 / std, 0, 1 / std]
    assert torch.allclose(adv, torch.tensor(expected), atol=1e-5)


def test_dr_grpo_only_subtracts_the_group_mean():
    result = grpo(_single_step_batch([[10, 0, 0, 10], [1, 2, 3]]), GRPOConfig(norm_by_std=False))
    assert torch.allclose(result.step_advantages, torch.tensor([5.0, -5, -5, 5, -1, 0, 1]))


def test_grpo_gives_every_step_of_a_rollout_its_rollout_advantage():
    batch = CreditBatch.from_lists([[0.0, -0.1, 10.0], [0.0], [-0.1, 0.0, 0.0, 0.0]], [0, 0, 0])
    adv = grpo(batch, GRPOConfig()).step_advantages
    returns = torch.tensor([9.9, 0.0, -0.1])
    per_rollout = (returns - returns.mean()) / (returns.std(unbiased=False) + 1e-6)
    assert torch.allclose(adv, per_rollout[batch.step_rollout], atol=1e-5)


def test_grpo_gives_exactly_zero_to_a_group_whose_returns_are_equal_despite_rounding():
    # in float64, 0.1 + 0.1 + 0.1 = 0.30000000000000004: a naive (R − mean) / (std + eps)
    # turns that rounding noise into a non-zero advantage
    batch = _single_step_batch([[0.1, 0.1, 0.1], [1.0, 0.0]], dtype=torch.float64)
    result = grpo(batch, GRPOConfig())
    assert torch.equal(result.step_advantages[:3], torch.zeros(3, dtype=torch.float64))
    assert result.diagnostics["zero_signal_group_share"] == 0.5


def test_grpo_with_eps_zero_does_not_divide_zero_by_zero():
    adv = grpo(_single_step_batch([[3.0, 3.0], [1.0]]), GRPOConfig(eps=0.0)).step_advantages
    assert torch.equal(adv, torch.zeros(3))


def test_grpo_config_rejects_a_negative_eps():
    with pytest.raises(ValueError, match=r"GRPOConfig.eps = -1.0"):
        GRPOConfig(eps=-1.0)


_groups = st.lists(
    st.lists(st.floats(-20, 20, allow_nan=False, width=32), min_size=1, max_size=8),
    min_size=1, max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(groups=_groups, norm_by_std=st.booleans())
def test_grpo_advantages_sum_to_zero_within_each_group(groups, norm_by_std):
    batch = _single_step_batch(groups)
    adv = grpo(batch, GRPOConfig(norm_by_std=norm_by_std)).step_advantages.double()
    sums = torch.zeros(len(groups), dtype=torch.float64).index_add_(0, batch.group_ids, adv)
    scale = max(1.0, max(abs(r) for g in groups for r in g))
    assert torch.allclose(sums, torch.zeros_like(sums), atol=1e-4 * scale)


@settings(max_examples=60, deadline=None)
@given(groups=_groups)
def test_grpo_advantages_have_unit_population_std_in_every_non_constant_group(groups):
    batch = _single_step_batch(groups)
    adv = grpo(batch, GRPOConfig(eps=0.0)).step_advantages
    for g, group in enumerate(groups):
        values = adv[batch.group_ids == g]
        if len(set(group)) > 1:
            assert values.std(unbiased=False).item() == pytest.approx(1.0, abs=1e-3)
        else:
            assert torch.equal(values, torch.zeros_like(values))


def test_group_std_is_the_population_std_and_exactly_zero_in_a_group_of_equal_values():
    # 0.1 three times: a naive mean is 0.10000000000000002, so x − mean is not 0
    values = torch.tensor([1.0, 3.0, 0.1, 0.1, 0.1, 2.0], dtype=torch.float64)
    group = torch.tensor([0, 0, 1, 1, 1, 2])
    std = group_std(values, group, 4)
    assert std[0].item() == 1.0  # (1, 3): mean 2, deviations ±1
    assert std[1].item() == 0.0 and std[2].item() == 0.0 and std[3].item() == 0.0
