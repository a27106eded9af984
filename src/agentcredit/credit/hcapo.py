"""HCAPO: hindsight credit assignment (Tan et al. 2026, "Hindsight Credit Assignment for
Long-Horizon LLM Agents").

The policy itself is the critic: after a rollout ends, the frozen behaviour
snapshot rescores each response with the rollout's final observation added to
its prompt (``train/scoring/hindsight_pass.py``, the same kind of pass as ADRS's teacher). An
action the policy finds likelier once it knows how the episode ended is one the
outcome vouches for; the ratio rescales that step's return-to-go, and a
group-relative score of the rescaled value is added to GRPO's advantage:

    π_hind(a_t | ·) = exp(m_t / T),   m_t = mean_{j∈V_t} ℓ_{t,j},  T = 5
    ρ_{i,t}   = π_hind(a_t | s_t, o_T) / π_hind(a_t | s_t) = exp((m^H_{i,t} − m^b_{i,t}) / T)
    ρ̃_{i,t}   = clip(ρ_{i,t} / mean_{t'} ρ_{i,t'}, 0.8, 1.2)  (mean over rollout i's steps)
    Q^H_{i,t} = ρ̃_{i,t} · G_{i,t},   G_{i,t} = Σ_{k≥t} γ^{k−t} r_{i,k}
    A_{i,t}   = A^GRPO_i + ω · (Q^H_{i,t} − μ_g(Q^H)) / (σ_g(Q^H) + ε)
    A_{i,t}   ← max(A_{i,t}, 0)   for every step of a successful rollout i

Symbols → variables: ``m^H``/``m^b`` → ``batch.hindsight.hindsight/behaviour [S]``;
``T`` → ``temperature``; ``ρ`` → ``ratio``, ``ρ̃`` → ``normalised [S]`` (clip bounds
``ratio_clip``); ``G`` → ``return_to_go [S]`` (``gigpo.discounted_return_to_go``);
``A^GRPO_i`` → ``macro [B]``; ``μ_g``/``σ_g`` → mean and population std over every step
of group ``g``'s rollouts; ``ω`` → ``step_weight``; successful → ``R_i > success_threshold``.

[choice] The denominator ``π(a_t | s_t)`` is put through the same length-normalised,
tempered transform as the numerator (the issue gives ``π_hind = exp(mean ℓ / 5)`` for the
hindsight side only), so ``ρ = 1`` when the final observation changes nothing.
[choice] ``γ = 0.95`` (GiGPO's), as the HCAPO text at hand names no discount.
[choice] The group z-score of ``Q^H`` is over all steps of the group's rollouts (one
statistic per group; a group whose ``Q^H`` are all equal gives 0).
[choice] "Negative values inside successful trajectories are set to 0" is applied to
the final advantage ``A_{i,t}`` (the sum), so a successful rollout's step is never
pushed down; the hindsight term may still lower it toward 0.
[choice] A rollout succeeded when its return ``R_i`` (outcome plus penalties) exceeds
``success_threshold = 0``: ALFWorld's ``10·1[won]`` outcome dwarfs the −0.1 penalties.

Which hindsight scores can change an advantage (``hindsight_rollouts``). ``ℓ^H`` enters
only through ``ρ``, and ``ρ̃_{i,t}`` reads every step of rollout ``i`` (the mean), so a
rollout's scores count all together or not at all. They cannot change any advantage when

- every reward of rollout ``i`` is 0: then ``G_{i,t} = 0`` at every step, so
  ``Q^H_{i,t} = ρ̃_{i,t} · 0 = 0`` whatever ``ρ̃`` is (this covers the failed rollouts of
  a reward that pays only at success, and groups whose rollouts all failed without a
  penalty);
- rollout ``i`` has one step: ``ρ̃_{i,0} = clip(ρ_{i,0} / ρ_{i,0}) = clip(1)``.

Every other rollout's scores reach ``Q^H`` and, through ``μ_g`` and ``σ_g``, every step of
its group (equal returns do not help: ``A^GRPO = 0`` but the z-score of ``Q^H`` still varies
with ``ρ̃``). HCAPO sets ``ρ = 1`` on the rollouts the rule leaves out, so its whole result
(advantages, extras, diagnostics) reads ``ℓ^H`` of the marked rollouts only, and the advantages
are those of the formulas above wherever ``ρ`` is finite and positive (``|m^H − m^b| / T`` below
about 700). The trainer scores only the marked rollouts (``train/scoring/hindsight_pass.py``).
The rule reads the rewards, not the config: ``ω = 0`` would read no score at all, and is left
to GRPO.

Tested properties (tests/credit/test_hcapo.py): hand-worked advantages; the ratio clip
bounds ``ρ̃`` to [0.8, 1.2]; no step of a successful rollout is negative; ``ρ ≡ 1``
reduces the step term to the group z-score of ``G``; the rollouts ``hindsight_rollouts``
leaves out change no advantage (against the formulas computed without the rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from agentcredit.config.schema import validate
from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.gigpo import discounted_return_to_go
from agentcredit.credit.grpo import episode_group_diagnostics, group_relative
from agentcredit.credit.registry import register_estimator
from agentcredit.credit.result import CreditResult


@dataclass(frozen=True)
class HCAPOConfig:
    """Options of HCAPO (Tan et al. 2026).

    Attributes:
        temperature: ``T`` in (0, 1000] of ``π_hind = exp(mean token log-prob / T)``
            (paper: 5).
        ratio_clip_low: lower clip of the normalised hindsight ratio ``ρ̃``, 0 to 100
            (paper: 0.8).
        ratio_clip_high: upper clip of ``ρ̃``, 0 to 100 (paper: 1.2).
        gamma: ``γ`` ∈ [0, 1] of the return-to-go ``G`` (0.95, [choice]).
        step_weight: ``ω`` in [0, 100], weight of the group z-score of ``Q^H`` (paper: 1.0).
        success_threshold: a rollout succeeded when ``R_i`` exceeds it; its negative
            step advantages are set to 0 (0, [choice]); ±1e6, past any return.
        eps: ``ε`` in [0, 1] added to the population std of both z-scores (1e-6).
    """

    config_name: ClassVar[str] = "hcapo"
    _limits: ClassVar[dict[str, tuple]] = {
        "temperature": (0.0, 1000.0, "open"), "ratio_clip_low": (0.0, 100.0),
        "ratio_clip_high": (0.0, 100.0), "gamma": (0.0, 1.0), "step_weight": (0.0, 100.0),
        "success_threshold": (-1e6, 1e6), "eps": (0.0, 1.0)}

    temperature: float = 5.0
    ratio_clip_low: float = 0.8
    ratio_clip_high: float = 1.2
    gamma: float = 0.95
    step_weight: float = 1.0
    success_threshold: float = 0.0
    eps: float = 1e-6

    def __post_init__(self) -> None:
        validate(self)
        if self.ratio_clip_low > self.ratio_clip_high:
            raise ValueError(f"HCAPOConfig.ratio_clip_low = {self.ratio_clip_low} is above "
                             f"ratio_clip_high = {self.ratio_clip_high}; the clip needs "
                             "low <= high (paper: 0.8 and 1.2)")


def normalised_ratio(log_ratio: Tensor, batch: CreditBatch, low: float, high: float) -> Tensor:
    """``ρ̃ [S]``: ``ρ = exp(log_ratio)`` divided by its mean over each rollout's steps, clipped
    to ``[low, high]``."""
    ratio = log_ratio.to(torch.float64).exp()  # [S]
    sums = torch.zeros(batch.num_rollouts, dtype=torch.float64, device=ratio.device)
    sums.index_add_(0, batch.step_rollout, ratio)
    mean = sums / batch.episode_lengths.to(torch.float64)  # [B]
    return (ratio / mean[batch.step_rollout]).clamp(low, high)


def hindsight_rollouts(batch: CreditBatch) -> Tensor:
    """``[B]`` bool: the rollouts whose hindsight scores can change an HCAPO advantage, those
    with at least two steps and a non-zero reward (the module docstring derives it). Reads
    the rewards an estimator reads (after any shaping), never ``batch.hindsight``."""
    rewarded = torch.zeros(batch.num_rollouts, dtype=torch.long, device=batch.step_rewards.device)
    rewarded.index_add_(0, batch.step_rollout, (batch.step_rewards != 0).long())  # [B]
    return (rewarded > 0) & (batch.episode_lengths >= 2)


@register_estimator("hcapo", HCAPOConfig, needs=("hindsight",),
                    claims=("step_credit", "permutation"))
def hcapo(batch: CreditBatch, config: HCAPOConfig) -> CreditResult:
    """HCAPO step advantages (see the module docstring for the equations).

    Needs ``batch.hindsight``, read on the rollouts ``hindsight_rollouts`` marks only.
    Returns ``step_advantages [S]``; ``extras``:
    ``episode_advantage [B]`` (``A^GRPO``, VICT's direction), ``hindsight_ratio [S]``
    (``ρ̃``), ``hindsight_value [S]`` (``Q^H``); diagnostics: the GRPO ones plus the
    ratio's mean and clipped share (over every step, ``ρ = 1`` on the rollouts left out), the
    step term's scale and the share of steps the success rule lifted to 0.
    """
    if batch.hindsight is None:
        raise ValueError("hcapo needs the hindsight scores: build the batch with "
                         "hindsight=HindsightScores.from_step_rows(loss_mask, hindsight_logprobs, "
                         "old_logprobs) (the trainer's hindsight pass does, "
                         "train/scoring/hindsight_pass.py).")
    dtype = batch.step_rewards.dtype
    rollout_of = batch.step_rollout  # [S]
    # MACRO: GRPO over episode returns
    macro = group_relative(batch.returns, batch.group_index, batch.num_groups,
                           norm_by_std=True, eps=config.eps)  # [B]
    # HINDSIGHT RATIO: ρ = 1 where the scores cannot change an advantage (hindsight_rollouts)
    read = hindsight_rollouts(batch)[rollout_of]  # [S]
    log_ratio = torch.where(read, (batch.hindsight.hindsight - batch.hindsight.behaviour)
                            / config.temperature, 0.0)  # [S]
    normalised = normalised_ratio(log_ratio, batch, config.ratio_clip_low,
                                  config.ratio_clip_high)  # [S] ρ̃
    # MICRO: group z-score of Q^H over the group's steps
    value = normalised * discounted_return_to_go(batch, config.gamma).to(torch.float64)  # [S] Q^H
    micro = group_relative(value, batch.group_index[rollout_of], batch.num_groups,
                           norm_by_std=True, eps=config.eps)  # [S]
    combined = macro.to(torch.float64)[rollout_of] + config.step_weight * micro  # [S]
    success = (batch.returns > config.success_threshold)[rollout_of]  # [S]
    advantages = torch.where(success, combined.clamp(min=0.0), combined)
    raw = log_ratio.to(torch.float64).exp()
    diagnostics = episode_group_diagnostics(batch, macro)
    diagnostics.update({
        "ratio_mean": raw.mean().item(),
        "ratio_clipped_share": ((normalised == config.ratio_clip_low)
                                | (normalised == config.ratio_clip_high)).double().mean().item(),
        "mean_abs_step_term": (config.step_weight * micro).abs().mean().item(),
        "success_zeroed_share": (success & (combined < 0)).double().mean().item(),
    })
    return CreditResult(step_advantages=advantages.to(dtype), diagnostics=diagnostics,
                        extras={"episode_advantage": macro, "hindsight_ratio": normalised.to(dtype),
                                "hindsight_value": value.to(dtype)})
