"""GRPO and Dr.GRPO base advantages (docs/backbones.md §3), and the group statistics the backbones
share.

``group_centre``, ``group_variance``, ``group_std`` and ``group_relative`` are the one place
where values are centred / normalised within groups: RLOO, both levels of GiGPO, VICT's base
advantage and ADRS's calibration, token whitening and zero-signal check use them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from agentcredit.config.schema import validate
from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.registry import register_estimator
from agentcredit.credit.result import CreditResult


@dataclass(frozen=True)
class GRPOConfig:
    """Options of the GRPO backbone.

    Attributes:
        norm_by_std: divide by the group's population std (GRPO, Shao et al. 2024,
            DeepSeekMath); ``False`` keeps ``R_i − μ`` (Dr.GRPO, Liu et al. 2025,
            "Understanding R1-Zero-Like Training").
        eps: ``ε`` added to the std, 0 to 1 (papers: 1e-6).
    """

    config_name: ClassVar[str] = "grpo"
    _limits: ClassVar[dict[str, tuple]] = {"eps": (0.0, 1.0)}

    norm_by_std: bool = True
    eps: float = 1e-6

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True)
class GroupCentred:
    """Values centred within their groups.

    Attributes:
        centred: ``[N]``, ``x − μ_g`` (exactly 0 in a group whose values are all equal).
        counts: ``[G]``, the size of each group.
        constant: ``[G]`` bool, the group's values are all equal (incl. size-1 groups).
    """

    centred: Tensor
    counts: Tensor
    constant: Tensor


def group_centre(values: Tensor, group: Tensor, num_groups: int) -> GroupCentred:
    """Centre ``values [N]`` on the mean of their group ``group [N]`` (dense ids ``0..G-1``).

    Statistics are computed in float64 and a group whose values are all equal is
    centred to exactly 0, so equal rewards never produce rounding-noise advantages.
    """
    x = values.to(torch.float64)
    counts = torch.bincount(group, minlength=num_groups)  # [G]
    sums = torch.zeros(num_groups, dtype=torch.float64, device=x.device).index_add_(0, group, x)
    mean = sums / counts.clamp(min=1)  # [G]; empty groups (no members) are never read
    group_max = torch.full_like(sums, -torch.inf).scatter_reduce_(0, group, x, "amax")
    group_min = torch.full_like(sums, torch.inf).scatter_reduce_(0, group, x, "amin")
    constant = group_max == group_min  # [G]
    centred = torch.where(constant[group], 0.0, x - mean[group])  # [N]
    return GroupCentred(centred=centred, counts=counts, constant=constant)


def group_variance(stats: GroupCentred, group: Tensor) -> Tensor:
    """Population variance ``σ_g²`` of each group, float64 ``[G]``, from ``group_centre``'s
    result for the same ``group [N]``: exactly 0 in a constant group, 0 in an empty one."""
    sq = torch.zeros_like(stats.counts, dtype=stats.centred.dtype)
    return sq.index_add_(0, group, stats.centred.square()) / stats.counts.clamp(min=1)


def group_std(values: Tensor, group: Tensor, num_groups: int) -> Tensor:
    """Population std of ``values [N]`` within each group (dense ids), float64 ``[G]``; 0 for
    empty and constant groups."""
    return group_variance(group_centre(values, group, num_groups), group).sqrt()


def group_relative(values: Tensor, group: Tensor, num_groups: int, *, norm_by_std: bool,
                   eps: float) -> Tensor:
    """``(x − μ_g) / (σ_g + ε)`` (or ``x − μ_g`` without ``norm_by_std``) for ``values [N]``.

    ``σ_g`` is the population std. A group whose values are all equal — in
    particular a group of size 1 — gives exactly 0. Returns ``[N]`` in ``values.dtype``.
    """
    stats = group_centre(values, group, num_groups)
    out = stats.centred
    if norm_by_std:
        var = group_variance(stats, group)  # [G]
        # constant groups are 0 already; a denominator of 1 keeps eps = 0 from making 0/0
        denom = torch.where(stats.constant, 1.0, var.sqrt() + eps)  # [G]
        out = out / denom[group]
    return out.to(values.dtype)


@register_estimator("grpo", GRPOConfig, claims=("step_credit", "constant_group_zero",
                                                "permutation", "returns_only", "turn_baseline"))
def grpo(batch: CreditBatch, config: GRPOConfig) -> CreditResult:
    """GRPO base advantage, broadcast to every step (docs/backbones.md §3).

    ``A_i = (R_i − μ_g) / (σ_g + ε)`` with ``R_i`` = ``batch.returns [B]``,
    ``μ_g``/``σ_g`` the mean and population std of the returns of rollout ``i``'s
    group; Dr.GRPO (``norm_by_std=False``): ``A_i = R_i − μ_g``.

    Returns ``step_advantages [S]`` = ``A_{step_rollout[s]}``.
    Tested properties: advantages sum to 0 within each group; a group with equal
    returns gives 0; all steps of a rollout share its advantage.
    """
    group = batch.group_index  # [B]
    num_groups = batch.num_groups
    rollout_adv = group_relative(batch.returns, group, num_groups,
                                 norm_by_std=config.norm_by_std, eps=config.eps)  # [B]
    return CreditResult(
        step_advantages=rollout_adv[batch.step_rollout],  # [S]
        diagnostics=episode_group_diagnostics(batch, rollout_adv),
    )


def episode_group_diagnostics(batch: CreditBatch, rollout_adv: Tensor) -> dict[str, float]:
    """Diagnostics GRPO and RLOO share: group count, zero-signal groups, advantage scale."""
    stats = group_centre(batch.returns, batch.group_index, batch.num_groups)
    return {
        "num_groups": float(batch.num_groups),
        # groups whose rollouts all scored the same give no learning signal
        "zero_signal_group_share": stats.constant.double().mean().item(),
        "mean_abs_advantage": rollout_adv.abs().double().mean().item(),
    }
