"""Per-token scores of a batch's valid response tokens: the token-level part of a ``CreditBatch``.

Backbones work per step and never read this; ADRS (docs/adrs.md §5) and the
self-distillation baselines need the teacher's (and optionally the behaviour
and reference policies') log-prob of every sampled token. The ``N`` valid
tokens are stored flat, like steps:

    token n  →  flat step token_step[n]  →  rollout step_rollout[token_step[n]]

Ordering: step by step in the batch's flat step order and, inside a step, in
response order. That is exactly the order in which ``scores[loss_mask]`` lists
a ``[S, L]`` tensor whose row ``s`` is step ``s`` (the trainer's
``StepTensors`` layout), so ``TokenScores.from_step_rows(loss_mask, ...)``
builds one and a token-level result ``x [N]`` goes back with
``out = zeros(S, L); out[loss_mask] = x``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from agentcredit.credit.tensor_checks import check_finite, check_float_vector, check_on_device


@dataclass(frozen=True, eq=False)
class TokenScores:
    """Flat ``[N]`` per-token scores (docs/backbones.md §0 and docs/adrs.md §5.1); see the module
    docstring for the order.

    Attributes:
        token_step: ``[N]`` int64, the flat step ``0..S-1`` of each token;
            non-decreasing, and every step has at least one token.
        teacher_logprobs: ``[N]`` float, ``ℓ^T``: the frozen behaviour snapshot's
            log-prob of the token with the skill prefix in its context (detached).
        behaviour_logprobs: ``[N]`` float, ``ℓ^b``: the same snapshot without the
            skill; read by the probe gap and the ``opsd`` / ``sdar`` baselines.
        ref_logprobs: ``[N]`` float, ``ℓ_ref`` of the frozen reference policy;
            read only by ADRS's L1 gate.
        update: the 1-based index of the policy update this batch trains; read
            only when ADRS limits its token path to a window of updates.
    """

    token_step: Tensor
    teacher_logprobs: Tensor
    behaviour_logprobs: Tensor | None = None
    ref_logprobs: Tensor | None = None
    update: int | None = None

    @classmethod
    def from_step_rows(cls, loss_mask: Tensor, teacher_logprobs: Tensor,
                       behaviour_logprobs: Tensor | None = None,
                       ref_logprobs: Tensor | None = None,
                       update: int | None = None) -> TokenScores:
        """Flatten ``[S, L]`` position-aligned scores (row ``s`` = flat step ``s``) to the valid
        tokens.

        ``loss_mask [S, L]`` marks the response tokens; the score tensors are
        aligned with ``input_ids`` as the trainer's scoring passes return them
        (``train.scoring.behaviour_pass.score_steps``,
        ``train.scoring.teacher.privileged_logprobs``).
        """
        mask = loss_mask.bool()
        rows = torch.arange(mask.shape[0], device=mask.device)[:, None].expand_as(mask)  # [S, L]

        def flat(scores: Tensor | None) -> Tensor | None:
            return None if scores is None else scores[mask]

        return cls(token_step=rows[mask], teacher_logprobs=teacher_logprobs[mask],
                   behaviour_logprobs=flat(behaviour_logprobs), ref_logprobs=flat(ref_logprobs),
                   update=update)

    @property
    def num_tokens(self) -> int:
        """``N``, the number of valid response tokens."""
        return self.token_step.shape[0]


def to_step_rows(values: Tensor, loss_mask: Tensor) -> Tensor:
    """Scatter flat per-token ``values [N]`` back to ``[S, L]`` rows: ``out[loss_mask] = values``, 0
    elsewhere.

    The inverse of ``TokenScores.from_step_rows``; the trainer uses it for
    ``CreditResult.token_advantages`` before the PPO loss.
    """
    mask = loss_mask.bool()
    if values.dim() != 1 or values.shape[0] != int(mask.sum()):
        raise ValueError(f"to_step_rows got {tuple(values.shape)} values for {int(mask.sum())} "
                         "valid tokens; pass one value per True entry of loss_mask.")
    out = torch.zeros(mask.shape, dtype=values.dtype, device=values.device)
    out[mask.to(values.device)] = values
    return out


def check_token_scores(tokens: TokenScores, num_steps: int, device: torch.device) -> None:
    """Raise, saying what to fix, unless ``tokens`` fits a batch of ``num_steps`` steps on
    ``device``."""
    if not isinstance(tokens, TokenScores):
        raise TypeError(f"CreditBatch.tokens must be a TokenScores or None; got "
                        f"{type(tokens).__name__}. Build it with TokenScores.from_step_rows.")
    steps = tokens.token_step
    if not isinstance(steps, Tensor) or steps.dim() != 1 or steps.dtype != torch.long:
        raise ValueError("CreditBatch.tokens.token_step must be a 1-D int64 tensor, the flat step "
                         "of every valid token (TokenScores.from_step_rows builds it).")
    count = steps.shape[0]
    for name in ("teacher_logprobs", "behaviour_logprobs", "ref_logprobs"):
        value = getattr(tokens, name)
        if value is None and name != "teacher_logprobs":
            continue
        check_float_vector(value, f"CreditBatch.tokens.{name}",
                           f"with one log-prob per valid token ({count})", length=count)
        check_finite(value, f"CreditBatch.tokens.{name}",
                     "score only real response tokens, never padding")
    for name in ("token_step", "teacher_logprobs", "behaviour_logprobs", "ref_logprobs"):
        value = getattr(tokens, name)
        if value is not None:
            check_on_device(value, f"CreditBatch.tokens.{name}", device)
    if count and (steps.min() < 0 or steps.max() >= num_steps):
        raise ValueError(f"CreditBatch.tokens.token_step holds steps outside 0..{num_steps - 1}; "
                         "index the batch's flat steps.")
    if (steps[1:] < steps[:-1]).any():
        raise ValueError("CreditBatch.tokens.token_step decreases; list the tokens step by step "
                         "in the batch's flat step order (scores[loss_mask] does).")
    per_step = torch.bincount(steps, minlength=num_steps)  # [S]
    if (per_step == 0).any():
        bad = int(torch.nonzero(per_step == 0)[0])
        raise ValueError(f"CreditBatch step {bad} has no valid response token in "
                         "tokens.token_step; every step's response needs at least one token.")
    if tokens.update is not None and (isinstance(tokens.update, bool)
                                      or not isinstance(tokens.update, int) or tokens.update < 1):
        raise ValueError(f"CreditBatch.tokens.update = {tokens.update!r}; pass the 1-based index "
                         "of the policy update, or None.")
