"""ADRS: self-distilled reward shaping (docs/adrs.md §5.2–5.5) as a credit estimator.

Zhang et al. 2026, "Agentic Reinforcement Learning with Self-Distilled Reward
Shaping". The frozen behaviour snapshot rescores the sampled tokens with a
task-matched skill in its context (``ℓ^T``, computed by ``train/scoring/teacher.py``);
this module turns those scores into token-level credit inside the backbone's
own advantage, in three modules:

1. **Within-step calibration** (docs/adrs.md §5.2): ``q̂ = (ℓ^T − b_s) / (σ_q + ε)``,
   centred on the step's mean and scaled by a std over the ``global``, ``per_step`` or
   ``per_rollout`` scope. Each step's ``q̂`` sums to zero.
2. **TVA gate** (docs/adrs.md §5.3): a detached gate ``m`` in (0, 1) from the
   within-group association between unit confidence and pre-ADRS return:
   L2 units are rollouts of a prompt group (return ``R_i``), L3 units are steps
   sharing a GiGPO anchor state (return-to-go ``G``); L1 is the return-free
   token fallback ``sigmoid(τ(ℓ^T − ℓ_ref))``; ``off`` is ``m = 1``.
3. **Credit integration** (docs/adrs.md §5.4): ``r^T = η·m·q̂``; the trajectory path
   runs the backbone's native advantage on the shaped reward ``r̃ = r^base + r^T``;
   the token path whitens ``r^T`` over each prompt group's valid tokens into
   ``Z^T``; ``A^ADRS = A^traj + η·Z^T`` per token, where ``η·Z^T`` is left out in
   groups without return signal (``token_path_zero_signal=skip``) and optionally
   clipped (``z_clip``, fixed or adaptive). With GiGPO, the shaped
   reward enters the episode level only and the native step level is kept, so
   ``η·Z^T`` joins the episode-level advantage.

Symbols → variables: ``ℓ^T`` → ``teacher [N]``; ``b_s`` → ``step_mean [S]``;
``q``, ``q̂`` → ``q [N]``, ``q_hat [N]``; ``α_u`` → ``TVAGate.alpha [U]``;
``d_g`` → ``TVAGate.contrast [G]``; ``m`` → ``token_gate [N]``;
``r^T`` → ``teacher_reward [N]``; ``A^traj`` → ``step_adv [S]``;
``Z^T`` → ``z [N]``; ``A^ADRS`` → ``CreditResult.token_advantages [N]``.

Token layout: ``batch.tokens`` (``credit.tokens.TokenScores``), flat ``[N]``
over the valid response tokens; ``token_advantages`` comes back in the same
order (``advantages[loss_mask] = result.token_advantages``).

[choice] Numerical identities used instead of float residue: with a
step-shared gate (off, L2, L3) ``Σ_{j∈V_s} r^T_{s,j} = 0`` exactly (the paper's
Prop. 4.2), so the shaped returns *are* the base returns and the trajectory
path is the backbone's advantage bit for bit; adding the ~1e-9 rounding residue
instead would give groups whose rollouts all scored the same a spurious
non-zero GRPO advantage. With the L1 token gate the step sums are not zero and
are added. The trajectory path uses the backbone's own normalisation
(``(S − μ)/(σ + ε_B)`` for GRPO), which the paper's Algorithm 1 prescribes
("use the backbone's native credit construction on r̃") and which is what
makes ``η = 0`` reproduce the backbone exactly.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import torch
from torch import Tensor

from agentcredit.config.schema import validate
from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.gigpo import (
    GiGPOConfig,
    anchor_group_ids,
    discounted_return_to_go,
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

TOKEN_CLASSES = ("action", "object", "other")
# GateNorm divides by the contrast scale only above this (docs/adrs.md §5.3).
GATE_NORM_MIN_SCALE = 1e-8
# A group whose return std (GRPO) or every advantage (GiGPO) is below this carries no return
# signal, and the token path skips it under token_path_zero_signal=skip (docs/adrs.md §5.4).
ZERO_SIGNAL_THRESHOLD = 1e-6


@dataclass(frozen=True)
class ADRSConfig:
    """Options of ADRS (Zhang et al. 2026, docs/adrs.md §5); defaults are the paper's ALFWorld
    settings.

    Attributes:
        backbone: the native advantage ADRS shapes, with its own options: a
            ``GRPOConfig`` (``norm_by_std=false`` = Dr.GRPO) or a ``GiGPOConfig`` (in YAML
            and on the command line ``backbone.name=gigpo backbone.mode=mean_norm``).
        gate: ``L2`` (rollouts of a prompt group, the GRPO-level TVA), ``L3``
            (steps sharing a GiGPO anchor state), ``L1`` (return-free token
            fallback, needs reference log-probs) or ``off`` (``m = 1``).
        eta: ``η`` ≥ 0, the teacher scale (papers: 0.1 ALFWorld, 0.02 WebShop,
            0.05 Search). ``0`` reproduces the backbone exactly.
        scope: the tokens ``σ_q`` is taken over (docs/adrs.md §5.2): ``global`` (every
            valid token of the batch; the paper's ALFWorld and Search runs), ``per_step``
            (the step's own tokens; the authors' ``per_seq``, their WebShop run) or
            ``per_rollout`` (every token of the step's rollout).
        gate_norm: GateNorm, divide the contrasts by their (uncentred-sign)
            std over the batch's units when that std exceeds 1e-8 (docs/adrs.md §5.3).
        temperature: ``T`` > 0 of the soft confidence weight α (papers: 1.0).
        tau: ``τ`` > 0, the gate's slope (papers: 2.0).
        eps: ``ε`` > 0 of the calibration, the TVA contrast and the whitening (papers: 1e-8).
        gamma: ``γ`` of the L3 gate's return-to-go (papers: 0.95; a GiGPO backbone's
            step level uses its own ``backbone.gamma``).
        z_clip: clip the token path ``η·Z^T`` to ``±z_clip`` (the authors' ``wn_clip``,
            0.2 in their scripts); ``None`` = no clip (the paper's equations, the default).
        z_clip_adaptive: shrink each group's bound to ``z_clip · min(s_g / median s, 1)``,
            ``s_g`` = the group's largest ``|A^traj|`` (the authors' ``wn_adaptive_clip``);
            needs ``z_clip``.
        token_path_zero_signal: ``skip`` leaves ``η·Z^T`` out of groups without return
            signal (return std, or under GiGPO every advantage, below 1e-6; or one rollout),
            as the authors' code does (the default); ``apply`` adds it everywhere, the
            literal reading of the paper's Eq. 10 (docs/adrs.md §5.4).
        token_path_warmup: the token path ``η·Z^T`` stays off for the first
            ``token_path_warmup`` updates (authors' code: 20; default 0).
        token_path_updates: then stays on for this many updates and switches
            off again (authors' code: 50); ``None`` = on for good (default).
        paths: which of ADRS's two ways into the advantage run (docs/adrs.md §5.4, the
            paper's path ablation): ``both`` (default); ``token``, the token path ``η·Z^T`` on
            the backbone's advantage of the base rewards; ``reward``, the backbone on the
            shaped rewards with no token path (with a step-shared gate this is the backbone
            itself, since each step's ``r^T`` sums to 0).
    """

    _limits: ClassVar[dict[str, tuple]] = {
        "eta": (0.0, None), "temperature": (0.0, None, "open"), "tau": (0.0, None, "open"),
        "eps": (0.0, None, "open"), "gamma": (0.0, 1.0), "z_clip": (0.0, None, "open"),
        "token_path_warmup": (0, None), "token_path_updates": (1, None)}

    backbone: GRPOConfig | GiGPOConfig = field(default_factory=GRPOConfig)
    gate: Literal["off", "L1", "L2", "L3"] = "L2"
    eta: float = 0.1
    scope: Literal["global", "per_step", "per_rollout"] = "global"
    gate_norm: bool = False
    temperature: float = 1.0
    tau: float = 2.0
    eps: float = 1e-8
    gamma: float = 0.95
    z_clip: float | None = None
    z_clip_adaptive: bool = False
    token_path_zero_signal: Literal["skip", "apply"] = "skip"
    token_path_warmup: int = 0
    token_path_updates: int | None = None
    paths: Literal["both", "token", "reward"] = "both"

    def __post_init__(self) -> None:
        if self.scope == "per_seq":
            raise ValueError("ADRSConfig.scope = 'per_seq' is ambiguous and no longer accepted: "
                             "choose per_step (σ_q over the step's tokens, the ADRS authors' "
                             "per_seq) or per_rollout (over the rollout's tokens, the old "
                             "per_seq here)")
        validate(self)
        if self.z_clip_adaptive and self.z_clip is None:
            raise ValueError("ADRSConfig.z_clip_adaptive = True scales the bound z_clip, which "
                             "is None; set z_clip (the authors use 0.2) or z_clip_adaptive=false")

    @property
    def extra_inputs(self) -> tuple[str, ...]:
        """The L1 gate compares ``ℓ^T`` with the reference policy, so it needs its log-probs."""
        return ("reference",) if self.gate == "L1" else ()

    @property
    def has_window(self) -> bool:
        """Whether the token path is limited to a window of updates."""
        return self.token_path_warmup > 0 or self.token_path_updates is not None

    def token_path_active(self, update: int | None) -> bool:
        """Whether ``η·Z^T`` is applied at the 1-based ``update`` (always, without a window)."""
        if not self.has_window:
            return True
        if update is None:
            raise ValueError("ADRSConfig limits the token path to a window of updates "
                             f"(token_path_warmup={self.token_path_warmup}, token_path_updates="
                             f"{self.token_path_updates}) but the batch carries no update index; "
                             "pass TokenScores(update=...) with the 1-based update number.")
        end = math.inf if self.token_path_updates is None else \
            self.token_path_warmup + self.token_path_updates
        return self.token_path_warmup < update <= end


# MODULE 1: WITHIN-STEP CALIBRATION


def calibrate(teacher: Tensor, token_step: Tensor, num_steps: int, *, scope: str,
              token_rollout: Tensor, num_rollouts: int, eps: float) -> Tensor:
    """Within-step calibrated teacher scores ``q̂ [N]`` (docs/adrs.md §5.2).

    ``b_s = mean_{j∈V_s} ℓ^T_{s,j}``; ``q = ℓ^T − b_s``; ``σ_q`` = population
    std of ``q`` over the scope (``global``: all ``N`` tokens; ``per_step``: the
    tokens of the token's step; ``per_rollout``: the tokens of the token's
    rollout); ``q̂ = q / (σ_q + ε)``.

    Args:
        teacher: ``[N]`` ``ℓ^T``.
        token_step: ``[N]`` flat step of each token; every step has ≥ 1 token.
        num_steps: ``S``.
        scope: ``global``, ``per_step`` or ``per_rollout``.
        token_rollout: ``[N]`` rollout of each token (read by ``per_rollout``).
        num_rollouts: ``B``.
        eps: ``ε``.

    Returns ``q̂ [N]`` in float64. Tested property: it sums to zero over each
    step's tokens (the denominator is shared within a step under every scope).
    """
    q = group_centre(teacher, token_step, num_steps).centred  # ℓ^T − b_s, float64 [N]
    if scope == "global":
        sigma = q.std(correction=0).expand_as(q)
    elif scope == "per_step":
        sigma = group_std(q, token_step, num_steps)[token_step]
    elif scope == "per_rollout":
        sigma = group_std(q, token_rollout, num_rollouts)[token_rollout]
    else:
        raise ValueError(f"calibrate scope = {scope!r}; choose one of global, per_step, "
                         "per_rollout.")
    return q / (sigma + eps)


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

    # MODULE 3: SHAPED REWARD, TRAJECTORY PATH, TOKEN PATH
    teacher_reward = config.eta * token_gate * q_hat  # r^T [N]
    # A token gate breaks the step zero sum: the reward path adds the step sums.
    if config.gate == "L1" and config.paths != "token":
        step_shaping = torch.zeros(batch.num_steps, dtype=torch.float64, device=q_hat.device) \
            .index_add_(0, token_step, teacher_reward)
        shaped = dataclasses.replace(batch, step_rewards=batch.step_rewards
                                     + step_shaping.to(dtype))
    else:  # step-shared gate: Σ_{j∈V_s} r^T = 0, the shaped rewards are the base rewards
        shaped = batch
    extras: dict[str, Tensor] = {}
    if isinstance(config.backbone, GRPOConfig):
        native = grpo(shaped, config.backbone)
        step_adv = native.step_advantages  # A^traj [S]
        backbone_diagnostics = native.diagnostics
    else:
        gigpo_config = config.backbone
        levels = gigpo_levels(batch, gigpo_config, episode_returns=shaped.returns)
        step_adv = levels.combined(batch, gigpo_config)  # A^E(r̃) + w_S A^S(r^base) [S]
        backbone_diagnostics = {"mean_abs_episode_advantage":
                                levels.episode_adv.abs().double().mean().item(),
                                "mean_abs_step_advantage":
                                levels.step_adv.abs().double().mean().item()}
        extras.update(anchor_group_ids=levels.step_group, return_to_go=levels.return_to_go)
    z = whiten_in_groups(teacher_reward, token_group, batch.num_groups, config.eps)  # Z^T [N]
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


def _gate_diagnostics(level: str, gate: Tensor) -> dict[str, float]:
    """Mean, std and gated-up share (``m > 0.5``) of one level's gate over its units."""
    gate = gate.to(torch.float64)
    return {f"gate_mean.{level}": gate.mean().item(),
            f"gate_std.{level}": gate.std(correction=0).item(),
            f"gate_up_share.{level}": (gate > 0.5).double().mean().item()}


# DIAGNOSTICS ON PROBE TRAJECTORIES (docs/adrs.md §5.5)


def token_class_gap(token_class: Tensor, teacher: Tensor, behaviour: Tensor) -> dict[str, float]:
    """Mean ``ℓ^T − ℓ^b`` per token class on probe trajectories (docs/adrs.md §5.5, paper Fig. 6).

    Args:
        token_class: ``[N]`` int64, the index in ``TOKEN_CLASSES`` (action,
            object, other) of each token (``train/evaluation/probes.py`` classifies them).
        teacher: ``[N]`` ``ℓ^T``. behaviour: ``[N]`` ``ℓ^b``.

    Returns ``gap.<class>`` (mean gap) and ``tokens.<class>`` (count) for every
    class with at least one token; a class with no token has no ``gap`` entry.
    """
    gap = teacher.to(torch.float64) - behaviour.to(torch.float64)
    out: dict[str, float] = {}
    for index, name in enumerate(TOKEN_CLASSES):
        members = token_class == index
        count = int(members.sum())
        out[f"tokens.{name}"] = float(count)
        if count:
            out[f"gap.{name}"] = gap[members].mean().item()
    return out


__all__ = [
    "TOKEN_CLASSES",
    "ADRSConfig",
    "TVAGate",
    "adrs",
    "calibrate",
    "level_gate",
    "token_class_gap",
    "token_gate_l1",
    "tva_contrast",
    "tva_gate",
    "whiten_in_groups",
]
