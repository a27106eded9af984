"""GiGPO (Group-in-Group Policy Optimization) base advantages (docs/backbones.md §3).

Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent Training":
an episode-level group-relative advantage plus a step-level one computed among
the steps, across the group's rollouts, that acted from the same anchor state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from torch import Tensor

from agentcredit.config.schema import validate
from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.grpo import episode_group_diagnostics, group_relative
from agentcredit.credit.registry import register_estimator
from agentcredit.credit.result import CreditResult

GiGPOMode = Literal["mean_std_norm", "mean_norm"]


@dataclass(frozen=True)
class GiGPOConfig:
    """Options of the GiGPO backbone (Feng et al. 2025).

    Attributes:
        gamma: ``γ`` ∈ [0, 1], discount of the step-level return-to-go (papers: 0.95).
        step_weight: ``w_S`` in [0, 100], weight of the step-level advantage (papers: 1.0).
        mode: ``"mean_std_norm"`` normalises by mean and population std at both
            levels (GRPO-style); ``"mean_norm"`` only subtracts the mean.
        eps: ``ε`` in [0, 1] added to the std in ``mean_std_norm`` mode.
    """

    config_name: ClassVar[str] = "gigpo"
    _limits: ClassVar[dict[str, tuple]] = {"gamma": (0.0, 1.0), "step_weight": (0.0, 100.0),
                                           "eps": (0.0, 1.0)}

    gamma: float = 0.95
    step_weight: float = 1.0
    mode: GiGPOMode = "mean_std_norm"
    eps: float = 1e-6

    def __post_init__(self) -> None:
        validate(self)


def discounted_return_to_go(batch: CreditBatch, gamma: float) -> Tensor:
    """``G_{i,t} = Σ_{k≥t} γ^{k−t} r_{i,k}`` for every step, ``[S]``.

    Steps are scattered to a zero-padded ``[B, T]`` grid and multiplied by the
    ``[T, T]`` discount matrix ``D[k, t] = γ^{k−t}·1[k ≥ t]``: no loop, no
    ``γ^{−t}`` rescaling (which overflows on long episodes), and padding adds 0.
    """
    num_rollouts, horizon = batch.num_rollouts, int(batch.step_index.max()) + 1
    rewards = batch.step_rewards.to(torch.float64)
    padded = rewards.new_zeros(num_rollouts, horizon)  # [B, T]
    padded[batch.step_rollout, batch.step_index] = rewards
    t = torch.arange(horizon, device=rewards.device, dtype=torch.float64)
    lag = t[:, None] - t[None, :]  # [T, T], lag[k, t] = k − t
    discount = torch.where(lag >= 0, torch.tensor(gamma, dtype=torch.float64)
                           .pow(lag.clamp(min=0)), 0.0)  # [T, T]
    return_to_go = padded @ discount  # [B, T]
    return return_to_go[batch.step_rollout, batch.step_index].to(batch.step_rewards.dtype)  # [S]


def anchor_group_ids(batch: CreditBatch) -> Tensor:
    """Dense step-group ids ``[S]`` in ``0..K-1``, in order of first appearance.

    Two steps share a step group iff their rollouts are in the same task group
    and their anchor keys are equal; equal keys in different task groups do not
    meet (they are states of different tasks).
    """
    step_group = batch.group_index[batch.step_rollout].tolist()  # [S] task group of each step
    ids: dict[tuple[int, str], int] = {}
    dense = [ids.setdefault(key, len(ids)) for key in zip(step_group, batch.anchor_keys,
                                                           strict=True)]
    return torch.tensor(dense, dtype=torch.long, device=batch.step_rollout.device)


@dataclass(frozen=True)
class GiGPOLevels:
    """The two levels of GiGPO before they are combined.

    Attributes:
        episode_adv: ``[B]``, ``A^E_i``.
        step_adv: ``[S]``, ``A^S_{i,t}``.
        return_to_go: ``[S]``, ``G_{i,t}``.
        step_group: ``[S]``, dense anchor step-group ids (``anchor_group_ids``).
    """

    episode_adv: Tensor
    step_adv: Tensor
    return_to_go: Tensor
    step_group: Tensor

    def combined(self, batch: CreditBatch, config: GiGPOConfig) -> Tensor:
        """``A_{i,t} = A^E_i + w_S · A^S_{i,t}``, ``[S]``."""
        return self.episode_adv[batch.step_rollout] + config.step_weight * self.step_adv


def gigpo_levels(batch: CreditBatch, config: GiGPOConfig,
                 episode_returns: Tensor | None = None) -> GiGPOLevels:
    """Both levels of GiGPO (docs/backbones.md §3); ``gigpo`` combines them.

    ``episode_returns [B]`` replaces ``batch.returns`` at the episode level only
    (ADRS feeds its shaped returns there and keeps the native step level, docs/adrs.md §5.4).
    """
    norm_by_std = config.mode == "mean_std_norm"
    returns = batch.returns if episode_returns is None else episode_returns
    # EPISODE LEVEL
    episode_adv = group_relative(returns, batch.group_index, batch.num_groups,
                                 norm_by_std=norm_by_std, eps=config.eps)  # [B]
    # STEP LEVEL
    return_to_go = discounted_return_to_go(batch, config.gamma)  # [S]
    step_group = anchor_group_ids(batch)  # [S]
    num_step_groups = int(step_group.max()) + 1
    step_adv = group_relative(return_to_go, step_group, num_step_groups,
                              norm_by_std=norm_by_std, eps=config.eps)  # [S]
    return GiGPOLevels(episode_adv, step_adv, return_to_go, step_group)


@register_estimator("gigpo", GiGPOConfig,
                    claims=("step_credit", "permutation", "turn_baseline"))
def gigpo(batch: CreditBatch, config: GiGPOConfig) -> CreditResult:
    """GiGPO step advantages ``A_{i,t} = A^E_i + w_S · A^S_{i,t}`` (docs/backbones.md §3).

    Symbols → variables (``gigpo_levels``):
        ``R_i`` → ``batch.returns [B]``; ``A^E_i`` → ``episode_adv [B]``, the
        group-relative ``R_i`` (``mode`` picks std normalisation or mean only);
        ``G_{i,t}`` → ``return_to_go [S]`` (``discounted_return_to_go``);
        step group → ``step_group [S]`` (``anchor_group_ids``);
        ``A^S_{i,t}`` → ``step_adv [S]``, ``G`` normalised within its step group
        the same way; a step group of size 1 gives ``A^S = 0``; ``w_S`` → ``config.step_weight``.

    Returns ``step_advantages [S]`` and ``extras["anchor_group_ids"] [S]``,
    ``extras["return_to_go"] [S]`` (ADRS's L3 gate reads them).
    Tested properties: hand-computed ``G`` with γ = 0.95; size-1 step groups
    give ``A^S = 0``; in ``mean_norm`` mode ``A^S`` sums to 0 in each step group;
    anchor keys never join steps of different task groups.
    """
    levels = gigpo_levels(batch, config)
    step_group, step_adv = levels.step_group, levels.step_adv
    num_step_groups = int(step_group.max()) + 1
    step_group_sizes = torch.bincount(step_group, minlength=num_step_groups)  # [K]
    diagnostics = episode_group_diagnostics(batch, levels.episode_adv)
    diagnostics.update({
        "num_step_groups": float(num_step_groups),
        "mean_step_group_size": batch.num_steps / num_step_groups,
        "shared_anchor_step_share": (step_group_sizes[step_group] > 1).double().mean().item(),
        "mean_abs_step_advantage": step_adv.abs().double().mean().item(),
    })
    return CreditResult(
        step_advantages=levels.combined(batch, config),
        diagnostics=diagnostics,
        extras={"anchor_group_ids": step_group, "return_to_go": levels.return_to_go},
    )
