"""ADRS module 3, credit integration (docs/adrs.md §5.4): the shaped trajectory path, the
whitened token path and the registered estimator ``adrs``."""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from agentcredit.credit.adrs.calibration import calibrate
from agentcredit.credit.adrs.config import ZERO_SIGNAL_THRESHOLD, ADRSConfig
from agentcredit.credit.adrs.gates import level_gate, token_gate_l1
from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.gigpo import (
    GiGPOConfig,
    gigpo_levels,
)
from agentcredit.credit.grpo import (
    GRPOConfig,
    group_centre,
    group_std,
    group_variance,
    grpo,
)
from agentcredit.credit.registry import register_estimator
from agentcredit.credit.result import CreditResult

# MODULE 3: CREDIT INTEGRATION


def whiten_in_groups(values: Tensor, group: Tensor, num_groups: int, eps: float) -> Tensor:
    """``(x − mean_g x) / sqrt(Var_g x + ε)`` within each group (population variance), float64
    ``[N]``.

    The token path's ``Z^T`` (docs/adrs.md §5.4). Tested property: zero mean and unit
    variance within each group whose variance dominates ``ε``.
    """
    stats = group_centre(values, group, num_groups)
    return stats.centred / (group_variance(stats, group) + eps).sqrt()[group]


def group_strength(step_adv: Tensor, batch: CreditBatch) -> Tensor:
    """``s_g = max |A^traj|`` over the steps of each task group, float64 ``[G]``
    (docs/adrs.md §5.4)."""
    step_group = batch.group_index[batch.step_rollout]  # [S]
    return torch.zeros(batch.num_groups, dtype=torch.float64, device=step_adv.device) \
        .scatter_reduce_(0, step_group, step_adv.abs().to(torch.float64), reduce="amax")


def zero_signal_groups(batch: CreditBatch, strength: Tensor,
                       backbone: GRPOConfig | GiGPOConfig) -> Tensor:
    """The task groups whose returns carry no signal, ``[G]`` bool (docs/adrs.md §5.4).

    A group of one rollout; under GRPO a group whose pre-ADRS returns have a
    population std below ``1e-6``; under GiGPO a group whose every backbone
    advantage (``strength`` = ``s_g``) is below ``1e-6`` in magnitude.
    """
    rollouts = torch.bincount(batch.group_index, minlength=batch.num_groups)
    if isinstance(backbone, GRPOConfig):
        flat = group_std(batch.returns, batch.group_index, batch.num_groups) \
            < ZERO_SIGNAL_THRESHOLD
    else:
        flat = strength < ZERO_SIGNAL_THRESHOLD
    return (rollouts <= 1) | flat


def token_clip_bounds(strength: Tensor, rollouts: Tensor, clip: float,
                      adaptive: bool) -> Tensor:
    """The bound on ``|η·Z^T|`` of each task group, float64 ``[G]`` (docs/adrs.md §5.4).

    Fixed: ``clip`` everywhere. Adaptive: ``clip · min(s_g / (s̃ + 1e-6), 1)``, with
    ``s̃`` the median of ``s_g`` over the groups of ≥ 2 rollouts whose ``s_g ≥ 1e-6``
    (the lower middle value for an even count; 1 when there is none), so groups with a
    weaker return signal than the batch's typical one get a tighter bound.
    """
    bound = torch.full_like(strength, clip)
    if not adaptive:
        return bound
    informative = (rollouts >= 2) & (strength >= ZERO_SIGNAL_THRESHOLD)
    median = strength[informative].median() if informative.any() else 1.0
    return bound * (strength / (median + ZERO_SIGNAL_THRESHOLD)).clamp(max=1.0)


@register_estimator("adrs", ADRSConfig, needs=("teacher",),
                    claims=("step_credit", "permutation", "constant_group_zero"))
def adrs(batch: CreditBatch, config: ADRSConfig) -> CreditResult:
    """ADRS token advantages ``A^ADRS = A^traj + η·Z^T`` (docs/adrs.md §5.2–5.4).

    Reads ``batch.tokens`` (``ℓ^T``; ``ℓ_ref`` for L1; ``ℓ^b`` for a diagnostic).

    Returns:
        ``step_advantages [S]``: the trajectory path ``A^traj`` (the backbone's
        native advantage on the shaped reward; for GiGPO ``A^E(r̃) + w_S A^S(r^base)``);
        ``token_advantages [N]``: ``A^traj`` of the token's step plus ``η Z^T``
        (the trainer must use these, not the step values);
        ``extras``: ``q_hat``, ``token_gate``, ``teacher_reward`` (``r^T``),
        ``z_teacher`` (``Z^T``, unclipped) and ``token_path`` (``η·Z^T`` after the
        zero-signal skip and the clip), all ``[N]``, and for GiGPO ``anchor_group_ids``
        and ``return_to_go`` ``[S]``;
        ``diagnostics``: gate mean / std / gated-up share per level (L2, L3
        always, L1 when reference log-probs are present), share of ``|q̂| > 1``,
        scales of ``r^T`` and ``Z^T``, and the backbone's own diagnostics
        under ``backbone/``.

    Tested properties: each step's ``q̂`` sums to 0; ``η = 0`` gives the
    backbone's advantages exactly, for GRPO and GiGPO; ``Z^T`` has zero mean
    and unit variance per prompt group; undersized TVA groups gate at 0.5 and
    ``gate = off`` at 1; with ``skip`` a group without return signal gets exactly
    the backbone's advantage; ``|η·Z^T| ≤ z_clip``.
    """
    tokens = batch.tokens
    if tokens is None:
        raise ValueError("the adrs estimator needs the teacher's per-token log-probs: build the "
                         "CreditBatch with tokens=TokenScores.from_step_rows(loss_mask, "
                         "teacher_logprobs, ...) (train/scoring/teacher.py computes them).")
    if config.gate == "L1" and tokens.ref_logprobs is None:
        raise ValueError("ADRS gate L1 compares ℓ^T with the reference policy's log-probs; pass "
                         "TokenScores(ref_logprobs=...) or pick gate L2, L3 or off.")
    dtype = batch.step_rewards.dtype
    token_step = tokens.token_step  # [N]
    token_rollout = batch.step_rollout[token_step]  # [N]
    token_group = batch.group_index[token_rollout]  # [N]

    # MODULE 1: WITHIN-STEP CALIBRATION
    q_hat = calibrate(tokens.teacher_logprobs, token_step, batch.num_steps, scope=config.scope,
                      token_rollout=token_rollout, num_rollouts=batch.num_rollouts,
                      eps=config.eps)  # [N]

    # MODULE 2: TVA GATE (every level that can be computed, for the diagnostics)
    token_gate, diagnostics = _token_gate(batch, config, q_hat)

    # MODULE 3: SHAPED REWARD, TRAJECTORY PATH, TOKEN PATH
    teacher_reward = config.eta * token_gate * q_hat  # r^T [N]
    step_adv, backbone_diagnostics, extras = _trajectory_path(batch, config, teacher_reward)
    z = whiten_in_groups(teacher_reward, token_group, batch.num_groups, config.eps)  # Z^T [N]
    token_path, silent = _token_path(batch, config, z, step_adv, token_group)
    active = config.token_path_active(tokens.update) and config.paths != "reward"
    token_adv = step_adv[token_step]  # [N]
    if active:
        token_adv = token_adv + token_path.to(dtype)

    # DIAGNOSTICS
    diagnostics.update({
        "eta": float(config.eta),
        "token_path_active": float(active),
        "gate_token_mean": token_gate.mean().item(),
        "q_hat_abs_gt1_share": (q_hat.abs() > 1).double().mean().item(),
        "teacher_reward_abs_mean": teacher_reward.abs().mean().item(),
        "z_abs_mean": z.abs().mean().item(),
        "zero_signal_group_share": silent.double().mean().item(),
        "token_path_abs_mean": token_path.abs().mean().item(),
        "teacher_logprob_mean": tokens.teacher_logprobs.double().mean().item(),
        "token_advantage_abs_mean": token_adv.abs().double().mean().item(),
        **{f"backbone/{key}": value for key, value in backbone_diagnostics.items()},
    })
    if tokens.behaviour_logprobs is not None:
        diagnostics["teacher_minus_behaviour_mean"] = (
            tokens.teacher_logprobs.double() - tokens.behaviour_logprobs.double()).mean().item()
    extras.update(q_hat=q_hat.to(dtype), token_gate=token_gate.to(dtype),
                  teacher_reward=teacher_reward.to(dtype), z_teacher=z.to(dtype),
                  token_path=token_path.to(dtype))
    return CreditResult(step_advantages=step_adv, token_advantages=token_adv,
                        diagnostics=diagnostics, extras=extras)


def _token_gate(batch: CreditBatch, config: ADRSConfig, q_hat: Tensor
                ) -> tuple[Tensor, dict[str, float]]:
    """Module 2 (docs/adrs.md §5.3): the TVA gate ``m`` of each token under ``config.gate``,
    ``[N]`` (ones for ``off``), and the diagnostics of every level that can be computed (L2,
    L3 always; L1 when reference log-probs are present)."""
    tokens = batch.tokens
    diagnostics: dict[str, float] = {}
    gates: dict[str, Tensor] = {}
    for level in ("L2", "L3"):
        gate, unit = level_gate(level, batch, config)
        gates[level] = gate.gate[unit]  # [N]
        diagnostics.update(_gate_diagnostics(level, gate.gate))
        diagnostics[f"undersized_group_share.{level}"] = gate.undersized.double().mean().item()
        diagnostics[f"contrast_abs_mean.{level}"] = gate.contrast.abs().mean().item()
        if gate.norm_scale is not None:
            diagnostics[f"gate_norm_scale.{level}"] = gate.norm_scale
    if tokens.ref_logprobs is not None:
        gates["L1"] = token_gate_l1(tokens.teacher_logprobs, tokens.ref_logprobs, config.tau)
        diagnostics.update(_gate_diagnostics("L1", gates["L1"]))
    token_gate = gates[config.gate] if config.gate != "off" else torch.ones_like(q_hat)
    return token_gate, diagnostics


def _trajectory_path(batch: CreditBatch, config: ADRSConfig, teacher_reward: Tensor
                     ) -> tuple[Tensor, dict[str, float], dict[str, Tensor]]:
    """The trajectory path ``A^traj`` ``[S]`` on the shaped reward (docs/adrs.md §5.4), the
    backbone's diagnostics, and for GiGPO the extras ``anchor_group_ids`` and
    ``return_to_go`` ``[S]``.

    ``teacher_reward`` is ``r^T`` ``[N]``. GRPO: its native advantage on the shaped batch;
    GiGPO: ``A^E(r̃) + w_S A^S(r^base)``.
    """
    dtype = batch.step_rewards.dtype
    # A token gate breaks the step zero sum: the reward path adds the step sums.
    if config.gate == "L1" and config.paths != "token":
        step_shaping = torch.zeros(batch.num_steps, dtype=torch.float64,
                                   device=teacher_reward.device) \
            .index_add_(0, batch.tokens.token_step, teacher_reward)
        shaped = dataclasses.replace(batch, step_rewards=batch.step_rewards
                                     + step_shaping.to(dtype))
    else:  # step-shared gate: Σ_{j∈V_s} r^T = 0, the shaped rewards are the base rewards
        shaped = batch
    extras: dict[str, Tensor] = {}
    if isinstance(config.backbone, GRPOConfig):
        native = grpo(shaped, config.backbone)
        return native.step_advantages, native.diagnostics, extras  # A^traj [S]
    gigpo_config = config.backbone
    levels = gigpo_levels(batch, gigpo_config, episode_returns=shaped.returns)
    step_adv = levels.combined(batch, gigpo_config)  # A^E(r̃) + w_S A^S(r^base) [S]
    backbone_diagnostics = {"mean_abs_episode_advantage":
                            levels.episode_adv.abs().double().mean().item(),
                            "mean_abs_step_advantage":
                            levels.step_adv.abs().double().mean().item()}
    extras.update(anchor_group_ids=levels.step_group, return_to_go=levels.return_to_go)
    return step_adv, backbone_diagnostics, extras


def _token_path(batch: CreditBatch, config: ADRSConfig, z: Tensor, step_adv: Tensor,
                token_group: Tensor) -> tuple[Tensor, Tensor]:
    """The token path ``η·Z^T`` ``[N]`` after the zero-signal skip and the clip
    (docs/adrs.md §5.4), and the zero-signal groups ``[G]`` bool.

    ``z`` is ``Z^T`` ``[N]``, ``step_adv`` is ``A^traj`` ``[S]``, ``token_group`` the task
    group of each token ``[N]``. Tested property: ``|η·Z^T| ≤ z_clip``.
    """
    token_path = config.eta * z  # η·Z^T [N]
    strength = group_strength(step_adv, batch)  # s_g [G]
    silent = zero_signal_groups(batch, strength, config.backbone)  # [G]
    if config.token_path_zero_signal == "skip":
        token_path = torch.where(silent[token_group], 0.0, token_path)
    if config.z_clip is not None:
        rollouts = torch.bincount(batch.group_index, minlength=batch.num_groups)
        bound = token_clip_bounds(strength, rollouts, config.z_clip,
                                  config.z_clip_adaptive)[token_group]  # [N]
        token_path = torch.maximum(torch.minimum(token_path, bound), -bound)
    return token_path, silent

def _gate_diagnostics(level: str, gate: Tensor) -> dict[str, float]:
    """Mean, std and gated-up share (``m > 0.5``) of one level's gate over its units."""
    gate = gate.to(torch.float64)
    return {f"gate_mean.{level}": gate.mean().item(),
            f"gate_std.{level}": gate.std(correction=0).item(),
            f"gate_up_share.{level}": (gate > 0.5).double().mean().item()}
