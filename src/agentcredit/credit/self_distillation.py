"""Auxiliary losses of the privileged self-distillation baselines ``opsd`` and ``sdar``
(docs/adrs.md §5.6).

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
"""

from __future__ import annotations

import torch
from torch import Tensor

OPSD_BETA = 0.1  # docs/adrs.md §5.6 [choice]
SDAR_TAU = 2.0  # [choice] SDAR's gate slope, ADRS's τ


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
