"""An estimator plug-in: RLOO with a bonus on each rollout's last step (docs/extending.md)."""

from dataclasses import dataclass
from typing import ClassVar

import torch

from agentcredit.config.schema import validate
from agentcredit.credit import CreditBatch, CreditResult, register_estimator


@dataclass(frozen=True)
class LastStepBonusConfig:
    """Options of last_step_bonus.

    Attributes:
        bonus: the factor on a rollout's last step, in (0, 100].
    """

    _limits: ClassVar[dict[str, tuple]] = {"bonus": (0.0, 100.0, "open")}

    bonus: float = 2.0

    def __post_init__(self) -> None:
        validate(self)  # a bad value is one error naming the key and its range


@register_estimator("last_step_bonus", LastStepBonusConfig,
                    claims=("step_credit", "constant_group_zero", "permutation"))
def last_step_bonus(batch: CreditBatch, config: LastStepBonusConfig) -> CreditResult:
    """RLOO's leave-one-out advantage, times ``bonus`` on each rollout's last step."""
    group = batch.group_index                                             # [B]
    sums = torch.zeros(batch.num_groups, dtype=torch.float64).index_add_(
        0, group, batch.returns.double())
    counts = torch.bincount(group, minlength=batch.num_groups)            # [G]
    others = (counts[group] - 1).clamp(min=1)
    rollout = batch.returns.double() - (sums[group] - batch.returns.double()) / others
    rollout = torch.where(counts[group] > 1, rollout, 0.0)                # [B]
    last = batch.step_index == batch.episode_lengths[batch.step_rollout] - 1
    scale = torch.where(last, config.bonus, 1.0)                          # [S]
    return CreditResult(step_advantages=(rollout[batch.step_rollout] * scale).float())
