"""DAPO's soft overlong penalty (credit/overlong.py): the ramp, the shaped step rewards, and
the verl rows getting the same shaping as ``agentcredit train`` (hand-worked numbers)."""

from __future__ import annotations

import pytest
import torch

from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.overlong import OverlongPenalty
from agentcredit.integrations.verl import rows as verl_rows

#: L_max = 20, buffer 0.2 → L_c = 4, c = 0.1
DAPO = OverlongPenalty(max_tokens=20, buffer=0.2, penalty=0.1)


def test_the_overlong_penalty_ramps_from_zero_to_minus_c_over_the_buffer():
    lengths = torch.tensor([3, 16, 17, 18, 19, 20])
    # 0 up to 16 tokens, then −c·(|y| − 16)/4
    expected = [0.0, 0.0, -0.25 * 0.1, -0.5 * 0.1, -0.75 * 0.1, -0.1]
    assert DAPO.step_penalties(lengths).tolist() == pytest.approx(expected)
    off = OverlongPenalty(max_tokens=20, buffer=0.0, penalty=0.1)
    assert off.step_penalties(lengths).tolist() == [0.0] * 6


def _batch(rewards: list[float]) -> CreditBatch:
    count = len(rewards)
    return CreditBatch(group_ids=torch.zeros(count, dtype=torch.long),
                       step_rollout=torch.arange(count), step_index=torch.zeros(count,
                                                                                dtype=torch.long),
                       step_rewards=torch.tensor(rewards), anchor_keys=("a",) * count)


def test_the_penalty_is_added_to_the_step_rewards_with_its_figures():
    shaped, metrics = DAPO.apply(_batch([1.0, 1.0, 0.0, 0.0]), torch.tensor([20, 16, 18, 3]))
    assert shaped.step_rewards.tolist() == pytest.approx([0.9, 1.0, -0.05, 0.0])
    # two of four steps penalised, mean penalty (−0.1 − 0.05) / 4
    assert metrics == pytest.approx({"reward/overlong_step_share": 0.5,
                                     "reward/overlong_penalty_mean": -0.0375})
    off = OverlongPenalty(max_tokens=20, buffer=0.0, penalty=0.1)
    batch = _batch([1.0])
    assert off.apply(batch, torch.tensor([20])) == (batch, {})


def _rows(lengths_by_row: list[int], trajectories: list[str]) -> verl_rows.StepRows:
    """One group, one step per rollout, reward 1 each; row ``r`` is a response of
    ``lengths_by_row[r]`` tokens of rollout ``trajectories[r]``."""
    count = len(trajectories)
    fields = {verl_rows.GROUP: ["u"] * count, verl_rows.TRAJECTORY: trajectories,
              verl_rows.STEP: [0] * count, verl_rows.NUM_STEPS: [1] * count,
              verl_rows.REWARD: [1.0] * count, verl_rows.ANCHOR: ["room"] * count,
              verl_rows.ACTION: ["go"] * count}
    mask = torch.zeros(count, 24, dtype=torch.long)
    for r, length in enumerate(lengths_by_row):
        mask[r, :length] = 1
    return verl_rows.StepRows(fields=fields, response_mask=mask)


def test_the_verl_rows_get_the_overlong_penalty_in_their_own_row_order():
    # verl's row 0 is rollout u_1 (20 tokens, cut at the limit), row 1 is u_0 (16 tokens)
    rows = _rows([20, 16], ["u_1", "u_0"])
    advantages, _, credit, metrics = verl_rows.compute_row_credit(rows, "grpo", overlong=DAPO)
    # flat order is by trajectory id: u_0 (no penalty) first, then u_1 (−0.1)
    assert credit.batch.step_rewards.tolist() == pytest.approx([1.0, 0.9])
    assert metrics == pytest.approx({"reward/overlong_step_share": 0.5,
                                     "reward/overlong_penalty_mean": -0.05})
    # equal outcomes, so the penalty alone sets the pair apart: the cut-off row loses
    assert advantages[0, 0] < 0 < advantages[1, 0]
    plain, _, _, none = verl_rows.compute_row_credit(rows, "grpo")
    assert none == {} and (plain == 0).all()
