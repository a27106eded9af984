"""The privileged self-distillation baselines of docs/adrs.md §5.6: the auxiliary losses
``opsd``, ``sdar`` and ``skill_sd`` and the advantage estimator ``rlsd``.

Both run GRPO unchanged and add a token-level term that pulls the student
(the current policy on the ordinary, skill-free context) toward the privileged
teacher (the frozen behaviour snapshot with the skill, ``ℓ^T``). They sit next
to ADRS because they consume the same teacher scores; unlike ADRS they act
outside the advantage, as a second loss term, which is the comparison the ADRS
paper makes (its Table 1 and Prop. 4.3).

Pure tensor functions with the layout of ``train/loss.ppo_loss``: ``[B, L]``
tensors aligned with the token ids, a ``mask`` of valid tokens, a
``normalizer`` ``|V|`` for gradient accumulation; the trainer adds the returned
loss to the PPO loss of the same micro-batch.

[choice] The form of the term. docs/adrs.md §5.6 writes ``β · mean_t (ℓ_θ − ℓ^T)`` on
sampled tokens, the per-token reverse-KL estimate ``log π_θ − log π_T``.
Differentiated literally (samples fixed), its gradient is ``β · mean_t ∇ℓ_θ``:
``ℓ^T`` drops out, so it would push every sampled token down equally whatever
the teacher says. The on-policy gradient of ``KL(π_θ ‖ π_T)`` is the
score-function form ``E[(ℓ_θ − ℓ^T) ∇ℓ_θ]``, which is what we implement:

    opsd:  L_aux = β · (1/|V|) Σ_{t∈V} sg(ℓ_θ,t − ℓ^T_t) · ℓ_θ,t
    sdar:  L_aux = β · (1/|V|) Σ_{t∈V} g_t · sg(ℓ_θ,t − ℓ^T_t) · ℓ_θ,t,
           g_t = sg(sigmoid(τ (ℓ^T_t − ℓ^b_t)))

i.e. a detached per-token coefficient ``a_t = −β·g_t·(ℓ_θ − ℓ^T)`` on
``∇ log π_θ`` — exactly the "sampled-token auxiliary coefficient" of the ADRS
paper's Prop. 4.3. Tokens the teacher finds likelier than the student are
pushed up, the others down (tested). SDAR's gate keeps the term mostly on
tokens where the teacher is more confident than the behaviour policy.

Skill-SD (the ADRS authors' ``SkillSD`` trainer) keeps GRPO and adds the k3 estimate of
``KL(π_θ ‖ π_T)`` on sampled tokens, importance-weighted back to the behaviour policy:

    skill_sd:  L_aux = β · (1/|V|) Σ_{t∈V} ρ_t · k3_t,
               ρ_t = exp(min(ℓ_θ,t − ℓ^b_t, 10)),  k3_t = exp(ℓ^T_t − ℓ_θ,t) − 1 + (ℓ_θ,t − ℓ^T_t)

differentiated as written (``ρ`` and ``k3`` both carry gradient). RLSD (the authors'
``RLSD`` trainer) changes the advantage instead of the loss, see ``rlsd_token_advantages``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor

from agentcredit.config.schema import validate
from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.grpo import GRPOConfig, grpo
from agentcredit.credit.registry import register_estimator
from agentcredit.credit.result import CreditResult

OPSD_BETA = 0.01  # the ADRS authors' distillation weight (docs/adrs.md §5.6)
SDAR_TAU = 5.0  # the ADRS authors' SDAR gate slope
SKILL_SD_BETA = 0.1  # the ADRS authors' sdl_lambda
_MAX_LOG_RHO = 10.0  # the authors' clamp on log ρ of Skill-SD
_MAX_LOG_GAP = 20.0  # keeps exp(ℓ^T − ℓ_θ) finite on garbage log-probs


def _validated(logprobs: Tensor, mask: Tensor, normalizer: Tensor | float | None,
               **aligned: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    for name, tensor in aligned.items():
        if tensor.shape != logprobs.shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)}, logprobs has "
                             f"{tuple(logprobs.shape)}; pass [B, L] tensors aligned with the ids.")
    if mask.shape != logprobs.shape:
        raise ValueError(f"mask has shape {tuple(mask.shape)}, logprobs has "
                         f"{tuple(logprobs.shape)}")
    valid = mask.bool()
    weight = valid.to(logprobs.dtype)
    if normalizer is None:
        normalizer = weight.sum()
    denom = torch.as_tensor(normalizer, dtype=logprobs.dtype, device=logprobs.device).clamp(min=1)
    return valid, weight, denom


def opsd_loss(logprobs: Tensor, teacher_logprobs: Tensor, mask: Tensor, beta: float = OPSD_BETA,
              *, normalizer: Tensor | float | None = None) -> tuple[Tensor, dict[str, float]]:
    """On-policy self-distillation auxiliary loss (``opsd``, docs/adrs.md §5.6), see the module
    docstring.

    Args:
        logprobs: ``[B, L]`` ``ℓ_θ`` = log π_θ of the sampled tokens on the
            ordinary context, with gradient.
        teacher_logprobs: ``[B, L]`` ``ℓ^T`` (detached here).
        mask: ``[B, L]`` valid tokens ``V``.
        beta: ``β`` ≥ 0.
        normalizer: ``|V|`` of the mini-batch (as in ``ppo_loss``); ``None`` = ``mask.sum()``.

    Returns ``(loss, stats)`` with ``opsd_gap``: mean ``ℓ_θ − ℓ^T`` over valid
    tokens (the sampled reverse-KL estimate), divided by the normaliser.
    """
    valid, weight, denom = _validated(logprobs, mask, normalizer,
                                      teacher_logprobs=teacher_logprobs)
    return _distill(logprobs, teacher_logprobs, valid, weight, denom, beta, gate=None,
                    prefix="opsd")


def sdar_loss(logprobs: Tensor, teacher_logprobs: Tensor, behaviour_logprobs: Tensor, mask: Tensor,
              beta: float = OPSD_BETA, tau: float = SDAR_TAU, *,
              normalizer: Tensor | float | None = None) -> tuple[Tensor, dict[str, float]]:
    """Confidence-gated self-distillation auxiliary loss (``sdar``, docs/adrs.md §5.6).

    As ``opsd_loss`` with each token's term weighted by the detached gate
    ``g_t = sigmoid(τ (ℓ^T_t − ℓ^b_t))``; ``behaviour_logprobs`` = ``ℓ^b`` ``[B, L]``.

    Returns ``(loss, stats)`` with ``sdar_gap`` and ``sdar_gate_mean``.
    """
    valid, weight, denom = _validated(logprobs, mask, normalizer,
                                      teacher_logprobs=teacher_logprobs,
                                      behaviour_logprobs=behaviour_logprobs)
    gate = torch.sigmoid(tau * (teacher_logprobs.detach() - behaviour_logprobs.detach()))
    return _distill(logprobs, teacher_logprobs, valid, weight, denom, beta, gate=gate,
                    prefix="sdar")


def skill_sd_loss(logprobs: Tensor, teacher_logprobs: Tensor, behaviour_logprobs: Tensor,
                  mask: Tensor, beta: float = SKILL_SD_BETA, *,
                  normalizer: Tensor | float | None = None) -> tuple[Tensor, dict[str, float]]:
    """Skill-SD's self-distillation loss ``β · mean_V ρ·k3`` (docs/adrs.md §5.6), see the module
    docstring; ``ℓ^T`` and ``ℓ^b`` are detached, ``ℓ_θ`` keeps its gradient.

    Tested on hand-computed tokens: the loss value, and that it is 0 with zero gradient where
    ``ℓ_θ = ℓ^T = ℓ^b`` (the k3 estimate's minimum).

    Returns ``(loss, stats)`` with ``skill_sd_gap`` (mean ``ℓ_θ − ℓ^T``) and ``skill_sd_k3``.
    """
    valid, weight, denom = _validated(logprobs, mask, normalizer,
                                      teacher_logprobs=teacher_logprobs,
                                      behaviour_logprobs=behaviour_logprobs)
    gap = torch.where(valid, logprobs - teacher_logprobs.detach(), 0.0)  # ℓ_θ − ℓ^T, with grad
    k3 = torch.exp((-gap).clamp(max=_MAX_LOG_GAP)) - 1.0 + gap
    log_rho = torch.where(valid, logprobs - behaviour_logprobs.detach(), 0.0)
    rho = torch.exp(log_rho.clamp(max=_MAX_LOG_RHO))
    loss = beta * (rho * k3 * weight).sum() / denom
    stats = {"skill_sd_gap": ((gap.detach() * weight).sum() / denom).item(),
             "skill_sd_k3": ((k3.detach() * weight).sum() / denom).item()}
    return loss, stats


# RLSD: TEACHER-WEIGHTED TOKEN ADVANTAGES


@dataclass(frozen=True)
class RLSDConfig:
    """Options of RLSD (the ADRS authors' ``RLSD`` trainer, docs/adrs.md §5.6).

    Attributes:
        backbone: the GRPO advantage ``A_i`` RLSD reweights per token.
        lam: ``λ`` in [0, 1], the share of the advantage the teacher reweights (authors: 0.5);
            0 gives GRPO exactly.
        clip_eps: ``ε_w`` ≥ 0, the token weight is clipped to ``[1 − ε_w, 1 + ε_w]``
            (authors: 0.2).
        neg_reset: leave rollouts with ``A_i ≤ 0`` at ``A_i`` (the authors' option, off).
    """

    _limits: ClassVar[dict[str, tuple]] = {"lam": (0.0, 1.0), "clip_eps": (0.0, 1.0)}

    backbone: GRPOConfig = field(default_factory=GRPOConfig)
    lam: float = 0.5
    clip_eps: float = 0.2
    neg_reset: bool = False

    def __post_init__(self) -> None:
        validate(self)


def rlsd_token_advantages(step_adv: Tensor, token_step: Tensor, teacher: Tensor,
                          behaviour: Tensor, config: RLSDConfig) -> Tensor:
    """``Â_t = A · ((1 − λ) + λ · clip(exp(sign(A)·(ℓ^T_t − ℓ^b_t)), 1 ± ε_w))``, ``[N]``.

    ``step_adv [S]`` is the backbone's advantage of each step, ``token_step [N]`` the step of
    each token, ``teacher`` / ``behaviour`` ``[N]`` ``ℓ^T`` / ``ℓ^b``. A token the teacher
    prefers gets more of a positive advantage and less of a negative one (tested on hand
    numbers); ``λ = 0`` returns ``A`` unchanged.
    """
    adv = step_adv[token_step]  # A of each token's rollout [N]
    weight = torch.exp(torch.sign(adv) * (teacher - behaviour).to(adv.dtype))
    weight = weight.clamp(1.0 - config.clip_eps, 1.0 + config.clip_eps)  # w_t [N]
    shaped = adv * ((1.0 - config.lam) + config.lam * weight)
    if config.neg_reset:
        shaped = torch.where(adv <= 0, adv, shaped)
    return shaped


@register_estimator("rlsd", RLSDConfig, needs=("teacher",),
                    claims=("step_credit", "permutation", "constant_group_zero"))
def rlsd(batch: CreditBatch, config: RLSDConfig) -> CreditResult:
    """RLSD: GRPO's advantage reweighted per token by the teacher (``rlsd_token_advantages``).

    Reads ``batch.tokens`` (``ℓ^T`` and ``ℓ^b``). Returns GRPO's ``step_advantages [S]`` and
    the reweighted ``token_advantages [N]``.
    """
    tokens = batch.tokens
    if tokens is None or tokens.behaviour_logprobs is None:
        raise ValueError("the rlsd estimator needs ℓ^T and ℓ^b per token: build the CreditBatch "
                         "with tokens=TokenScores.from_step_rows(loss_mask, teacher_logprobs, "
                         "behaviour_logprobs)")
    native = grpo(batch, config.backbone)
    token_adv = rlsd_token_advantages(native.step_advantages, tokens.token_step,
                                      tokens.teacher_logprobs, tokens.behaviour_logprobs, config)
    diagnostics = {**{f"backbone/{key}": value for key, value in native.diagnostics.items()},
                   "token_advantage_abs_mean": token_adv.abs().double().mean().item(),
                   "teacher_minus_behaviour_mean": (tokens.teacher_logprobs.double()
                                                    - tokens.behaviour_logprobs.double())
                   .mean().item()}
    return CreditResult(step_advantages=native.step_advantages, token_advantages=token_adv,
                        diagnostics=diagnostics)


def _distill(logprobs: Tensor, teacher: Tensor, valid: Tensor, weight: Tensor, denom: Tensor,
             beta: float, gate: Tensor | None, prefix: str) -> tuple[Tensor, dict[str, float]]:
    # Masked entries are zeroed before use so padding garbage never reaches the loss.
    gap = torch.where(valid, logprobs.detach() - teacher.detach(), 0.0)  # sg(ℓ_θ − ℓ^T)
    coefficient = gap if gate is None else gate.to(gap.dtype) * gap
    per_token = coefficient * torch.where(valid, logprobs, 0.0)
    loss = beta * (per_token * weight).sum() / denom
    stats = {f"{prefix}_gap": ((gap * weight).sum() / denom).item()}
    if gate is not None:
        stats[f"{prefix}_gate_mean"] = ((gate * weight).sum() / denom).item()
    return loss, stats
