"""The token-level PPO policy loss shared by every credit method (docs/backbones.md §1).

```
ω_t   = exp(log π_θ(y_t|c_t) − ℓ^b_t)
L     = −c_pg · (1/|V|) Σ_{t∈V} min(ω_t A_t, clip(ω_t, 1−ε_lo, 1+ε_hi) A_t)
        + β_KL · (1/|V|) Σ_{t∈V} KL_k3(π_θ ‖ π_ref)_t
        − c_H · (1/|V|) Σ_{t∈V} H_t
KL_k3 = exp(ℓ_ref − ℓ_θ) − (ℓ_ref − ℓ_θ) − 1
```

Variables: ``logprobs`` = log π_θ, ``old_logprobs`` = ℓ^b, ``ref_logprobs`` =
ℓ_ref, ``advantages`` = A (detached here), ``mask`` = V, ``clip_low`` /
``clip_high`` = ε_lo / ε_hi, ``kl_coef`` = β_KL, ``pg_coef`` = c_pg (1; 0 turns the
policy-gradient term off, the distillation-only baseline of docs/adrs.md §5.6),
``entropy`` = H_t the entropy of each token's predictive distribution, with gradient,
``entropy_coef`` = c_H (0; the entropy bonus of docs/adrs.md §5.4's ablations). All tensors
are [B, L] and aligned with the token ids, as the tree forward gives the new log-probs
(``train.scoring.tree_forward.branch_forward``) and the behaviour pass the old ones
(``train.scoring.behaviour_pass.score_steps``).

Properties the tests check: at ω = 1 and β_KL = 0 the gradient with respect to
``logprobs`` is ``−A·mask/|V|``; a token's gradient is zero exactly when its
ratio is past ``1+ε_hi`` with A > 0 or below ``1−ε_lo`` with A < 0; masked
tokens get zero gradient; the KL term is 0 when π_θ = π_ref and positive
otherwise.

Gradient accumulation: the ``|V|`` of docs/backbones.md §1 is the number of valid tokens of the
whole mini-batch. When a mini-batch is split into micro-batches, pass
``normalizer = mask_of_the_mini_batch.sum()`` to every micro-batch call and
``backward()`` each micro-batch's loss: their gradients add up to the gradient
of the mini-batch loss, however the tokens were split. (Averaging per-micro-batch
token means instead would over-weight the tokens of short micro-batches.) The
statistics follow the same rule: each is a sum over this call's valid tokens
divided by the normaliser, so summing them over the micro-batches of one
mini-batch gives the mini-batch token mean.
"""

from __future__ import annotations

import torch
from torch import Tensor

# Log-ratios are clamped before exp so a stale or garbage log-prob cannot give
# inf (and NaN gradients); e^20 is far past any clip bound.
_MAX_LOG_RATIO = 20.0


def ppo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    ref_logprobs: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    kl_coef: float = 0.01,
    *,
    normalizer: Tensor | float | None = None,
    pg_coef: float = 1.0,
    entropy: Tensor | None = None,
    entropy_coef: float = 0.0,
) -> tuple[Tensor, dict[str, float]]:
    """Clipped-ratio PPO loss with a k3 KL penalty to the reference policy, token-mean over V.

    Args:
        logprobs: [B, L] log π_θ of the sampled tokens, with gradient.
        old_logprobs: [B, L] ℓ^b, the behaviour policy's log-probs (no gradient taken).
        ref_logprobs: [B, L] ℓ_ref of the frozen reference, or ``None`` only when
            ``kl_coef`` is 0 (no reference model loaded).
        advantages: [B, L] A_t broadcast to tokens; detached here.
        mask: [B, L] bool or 0/1, the valid (policy-generated) tokens V.
        clip_low: ε_lo, the ratio is clipped below at ``1 − clip_low``.
        clip_high: ε_hi, the ratio is clipped above at ``1 + clip_high``
            (0.28 for ADRS primary runs).
        kl_coef: β_KL.
        normalizer: |V|. ``None`` uses ``mask.sum()`` (the call sees the whole
            mini-batch); under gradient accumulation pass the mini-batch's
            valid-token count (see the module docstring). Clamped to >= 1, so
            an all-masked input gives a zero loss.
        pg_coef: c_pg ≥ 0, the weight of the clipped surrogate (0: no policy gradient).
        entropy: [B, L] H_t, with gradient; needed when ``entropy_coef`` is not 0.
        entropy_coef: c_H ≥ 0, the entropy bonus ``−c_H · mean_V H``.

    Returns:
        ``(loss, stats)``: the scalar loss, and floats ``pg_loss`` (the clipped
        surrogate term), ``kl`` (mean k3 KL to the reference, before β_KL),
        ``clip_frac`` (share of valid tokens whose gradient the clip removed),
        ``approx_kl`` (k3 estimate of KL(π_old ‖ π_θ), ``(ω − 1) − log ω``, the
        CleanRL diagnostic) and ``ratio_mean`` (mean ω), each a sum over valid
        tokens divided by the normaliser.

    Kept as one function (past 80 lines): its terms read top to bottom as the module's formula.
    """
    _check_inputs(logprobs, {"old_logprobs": old_logprobs, "advantages": advantages,
                             "mask": mask, "ref_logprobs": ref_logprobs, "entropy": entropy},
                  clip_low, clip_high, kl_coef, entropy_coef)
    valid = mask.bool()
    weight = valid.to(logprobs.dtype)
    if normalizer is None:
        normalizer = weight.sum()
    denom = torch.as_tensor(normalizer, dtype=logprobs.dtype, device=logprobs.device).clamp(min=1)
    advantages = advantages.detach().to(logprobs.dtype)

    # Masked entries are replaced before exp, so padding can never yield inf/NaN.
    log_ratio = torch.where(valid, logprobs - old_logprobs.detach(), 0.0)
    ratio = torch.exp(log_ratio.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))  # ω [B, L]

    # POLICY GRADIENT: max of the two losses = min of the two objectives.
    surrogate = -advantages * ratio
    surrogate_clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    pg_per_token = torch.maximum(surrogate, surrogate_clipped)
    pg_loss = (pg_per_token * weight).sum() / denom

    # KL PENALTY: k3 estimator, unbiased for KL(π_θ ‖ π_ref) on tokens sampled from π_θ.
    if ref_logprobs is not None:
        ref_gap = torch.where(valid, ref_logprobs.detach() - logprobs, 0.0)
        ref_gap = ref_gap.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
        kl_per_token = torch.exp(ref_gap) - ref_gap - 1.0
        kl = (kl_per_token * weight).sum() / denom
    else:
        kl = logprobs.new_zeros(())
    loss = pg_coef * pg_loss + kl_coef * kl

    # ENTROPY BONUS: maximising H keeps the policy exploring.
    if entropy_coef != 0:
        loss = loss - entropy_coef * (torch.where(valid, entropy, 0.0) * weight).sum() / denom

    # DIAGNOSTICS
    with torch.no_grad():
        clipped = ((advantages > 0) & (ratio > 1.0 + clip_high)) | (
            (advantages < 0) & (ratio < 1.0 - clip_low)
        )
        stats = {
            "pg_loss": pg_loss.item(),
            "kl": kl.item(),
            "clip_frac": ((clipped & valid).to(weight.dtype).sum() / denom).item(),
            "approx_kl": ((((ratio - 1.0) - log_ratio) * weight).sum() / denom).item(),
            "ratio_mean": ((ratio * weight).sum() / denom).item(),
        }
    return loss, stats


def _check_inputs(logprobs: Tensor, others: dict[str, Tensor | None], clip_low: float,
                  clip_high: float, kl_coef: float, entropy_coef: float) -> None:
    """Raise, naming the argument, unless ``others`` have ``logprobs``' shape, the terms with a
    coefficient have their tensors, and the clip range is valid."""
    shape = logprobs.shape
    for name, tensor in others.items():
        if tensor is not None and tensor.shape != shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)}, logprobs has {tuple(shape)}")
    if others["ref_logprobs"] is None and kl_coef != 0:
        raise ValueError(f"kl_coef={kl_coef} needs ref_logprobs; pass them or set kl_coef=0")
    if others["entropy"] is None and entropy_coef != 0:
        raise ValueError(f"entropy_coef={entropy_coef} needs the token entropies; pass entropy "
                         "or set entropy_coef=0")
    if not (0 <= clip_low < 1 and clip_high >= 0):
        raise ValueError(
            f"clip_low={clip_low} must be in [0, 1) and clip_high={clip_high} must be >= 0"
        )
