"""ADRS module 2, the TVA gate (docs/adrs.md §5.3): L1 token, L2 rollout and L3 anchor
gates ``m``."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from agentcredit.credit.adrs.config import GATE_NORM_MIN_SCALE, ADRSConfig
from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.gigpo import (
    anchor_group_ids,
    discounted_return_to_go,
)

# MODULE 2: THE TVA GATE


def tva_contrast(alpha: Tensor, returns: Tensor, unit_group: Tensor, num_groups: int,
                 eps: float) -> Tensor:
    """TVA return contrast ``d_g = μ⁺_g − μ⁻_g`` per group, ``[G]`` (docs/adrs.md §5.3).

    ``μ⁺_g = Σ α_u R_u / (Σ α_u + ε)``, ``μ⁻_g = Σ (1−α_u) R_u / (Σ (1−α_u) + ε)``
    over the units ``u`` of group ``g``; a group with fewer than two units has
    ``d_g = 0``. Tested property: as ``ε → 0``,
    ``d_g = Cov_g(α, R) / (ᾱ_g (1 − ᾱ_g))`` (population moments), so its sign is
    the sign of the covariance.
    """
    a, r = alpha.to(torch.float64), returns.to(torch.float64)

    def group_sum(x: Tensor) -> Tensor:
        return torch.zeros(num_groups, dtype=torch.float64, device=x.device) \
            .index_add_(0, unit_group, x)

    mu_plus = group_sum(a * r) / (group_sum(a) + eps)
    mu_minus = group_sum((1 - a) * r) / (group_sum(1 - a) + eps)
    counts = torch.bincount(unit_group, minlength=num_groups)
    return torch.where(counts >= 2, mu_plus - mu_minus, 0.0)


@dataclass(frozen=True)
class TVAGate:
    """The TVA gate of one level, per unit.

    Attributes:
        alpha: ``[U]``, ``α_u = sigmoid((ℓ̄^T_u − ℓ̄_batch) / T)``.
        contrast: ``[G]``, ``d_g`` before GateNorm (0 for undersized groups).
        gate: ``[U]``, ``m_u = sigmoid(τ d̃_{g(u)})``, detached.
        undersized: ``[G]`` bool, groups with fewer than two units (gate 0.5).
        norm_scale: GateNorm's divisor, or ``None`` when GateNorm was not applied.
    """

    alpha: Tensor
    contrast: Tensor
    gate: Tensor
    undersized: Tensor
    norm_scale: float | None


def tva_gate(unit_confidence: Tensor, unit_returns: Tensor, unit_group: Tensor, num_groups: int,
             *, temperature: float, tau: float, eps: float, gate_norm: bool) -> TVAGate:
    """The TVA gate ``m_u`` of every unit (docs/adrs.md §5.3).

    Args:
        unit_confidence: ``[U]``, ``ℓ̄^T_u``, the mean ``ℓ^T`` over the unit's valid tokens.
        unit_returns: ``[U]``, ``R_u`` (pre-ADRS return, or return-to-go at L3).
        unit_group: ``[U]``, dense comparison-group ids ``0..G-1``.
        num_groups: ``G``.
        temperature: ``T``. tau: ``τ``. eps: ``ε``.
        gate_norm: divide ``d`` by its std over all units of the batch (not
            centred: the sign is kept), only when that std exceeds 1e-8.

    Groups with fewer than two units get ``d = 0`` hence ``m = 0.5``.
    """
    conf = unit_confidence.to(torch.float64)
    alpha = torch.sigmoid((conf - conf.mean()) / temperature)  # [U]
    contrast = tva_contrast(alpha, unit_returns, unit_group, num_groups, eps)  # [G]
    scaled, norm_scale = contrast, None
    if gate_norm:
        scale = float(contrast[unit_group].std(correction=0))
        if scale > GATE_NORM_MIN_SCALE:
            scaled, norm_scale = contrast / scale, scale
    gate = torch.sigmoid(tau * scaled)[unit_group]  # [U]
    undersized = torch.bincount(unit_group, minlength=num_groups) < 2
    return TVAGate(alpha=alpha, contrast=contrast, gate=gate, undersized=undersized,
                   norm_scale=norm_scale)


def token_gate_l1(teacher: Tensor, ref: Tensor, tau: float) -> Tensor:
    """L1 token fallback (docs/adrs.md §5.3), ``[N]``: ``m_t = sigmoid(τ (ℓ^T_t − ℓ^ref_t))``; no
    return."""
    return torch.sigmoid(tau * (teacher.to(torch.float64) - ref.to(torch.float64)))


def _unit_mean(values: Tensor, unit: Tensor, num_units: int) -> Tensor:
    counts = torch.bincount(unit, minlength=num_units).to(torch.float64)
    return torch.zeros(num_units, dtype=torch.float64, device=values.device) \
        .index_add_(0, unit, values.to(torch.float64)) / counts


def level_gate(level: str, batch: CreditBatch, config: ADRSConfig) -> tuple[TVAGate, Tensor]:
    """The L2 or L3 gate of ``batch`` and the token → unit map ``[N]`` that broadcasts it.

    L2: units = rollouts, grouped by task, ``R_u`` = ``batch.returns``.
    L3: units = steps, grouped by GiGPO anchor state within a task group,
    ``R_u`` = the discounted return-to-go ``G`` (``γ`` = ``config.gamma``).
    """
    tokens = batch.tokens
    token_step = tokens.token_step
    if level == "L2":
        unit, num_units = batch.step_rollout[token_step], batch.num_rollouts
        returns, unit_group, num_groups = batch.returns, batch.group_index, batch.num_groups
    elif level == "L3":
        unit, num_units = token_step, batch.num_steps
        returns = discounted_return_to_go(batch, config.gamma)
        unit_group = anchor_group_ids(batch)
        num_groups = int(unit_group.max()) + 1
    else:
        raise ValueError(f"level_gate level = {level!r}; the unit levels are L2 and L3.")
    confidence = _unit_mean(tokens.teacher_logprobs, unit, num_units)  # ℓ̄^T_u [U]
    gate = tva_gate(confidence, returns, unit_group, num_groups, temperature=config.temperature,
                    tau=config.tau, eps=config.eps, gate_norm=config.gate_norm)
    return gate, unit
