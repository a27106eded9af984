import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcredit.credit import CreditBatch
from agentcredit.credit.rloo import RLOOConfig, rloo


def _single_step_batch(groups: list[list[float]]) -> CreditBatch:
    rewards = [[r] for group in groups for r in group]
    group_ids = [g for g, group in enumerate(groups) for _ in group]
    return CreditBatch.from_lists(rewards, group_ids)


def test_rloo_subtracts_the_mean_of_the_other_rollouts():
    adv = rloo(_single_step_batch([[10, 0, 0, 10], [1, 2, 3]]), RLOOConfig()).step_advantages
    expected = [
        10 - (0 + 0 + 10) / 3, 0 - (10 + 0 + 10) / 3, 0 - (10 + 0 + 10) / 3, 10 - (0 + 0 + 10) / 3,
        1 - (2 + 3) / 2, 2 - (1 + 3) / 2, 3 - (1 + 2) / 2,
    ]
    assert torch.allclose(adv, torch.tensor(expected), atol=1e-5)


def test_rloo_gives_zero_to_a_group_of_one_rollout():
    adv = rloo(_single_step_batch([[10.0], [1.0, 0.0]]), RLOOConfig()).step_advantages
    assert adv[0].item() == 0.0
    assert torch.allclose(adv[1:], torch.tensor([1.0, -1.0]))


def test_rloo_gives_exactly_zero_to_a_group_whose_returns_are_equal():
    batch = CreditBatch.from_lists([[0.1], [0.1], [0.1]], [0, 0, 0], dtype=torch.float64)
    adv = rloo(batch, RLOOConfig()).step_advantages
    assert torch.equal(adv, torch.zeros(3, dtype=torch.float64))


def test_rloo_gives_every_step_of_a_rollout_its_rollout_advantage():
    batch = CreditBatch.from_lists([[0.0, -0.1, 10.0], [0.0], [-0.1, 0.0, 0.0, 0.0]], [0, 0, 0])
    adv = rloo(batch, RLOOConfig()).step_advantages
    per_rollout = torch.tensor([9.9 - (0.0 - 0.1) / 2, 0.0 - (9.9 - 0.1) / 2, -0.1 - 9.9 / 2])
    assert torch.allclose(adv, per_rollout[batch.step_rollout], atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(groups=st.lists(
    st.lists(st.floats(-20, 20, allow_nan=False, width=32), min_size=1, max_size=8),
    min_size=1, max_size=5,
))
def test_rloo_matches_an_explicit_leave_one_out_mean(groups):
    adv = rloo(_single_step_batch(groups), RLOOConfig()).step_advantages.tolist()
    expected = [
        r - (sum(group) - r) / (len(group) - 1) if len(group) > 1 else 0.0
        for group in groups for r in group
    ]
    assert adv == pytest.approx(expected, abs=1e-4)
