"""Score fixed token sequences under a causal LM: per-token log-probs and entropies.

Every log-prob the trainer needs goes through here: the behaviour policy's
``ℓ^b`` when it is recomputed, the reference policy's ``ℓ_ref`` (docs/backbones.md §1), the
ADRS teacher's ``ℓ^T`` (docs/adrs.md §5.1, the same model on a prompt with the skill
prepended) and, with ``requires_grad=True``, the current policy's
``log π_θ`` inside the PPO update.

Temperature: every function takes the ``temperature`` ``T`` of the policy being scored
and returns the log-probs of ``softmax(z / T)``, the distribution rollouts at that
temperature were sampled from (``rollout.policy``); the trainer passes
``RolloutConfig.policy_temperature`` to every pass, so PPO trains the policy that sampled
the batch (docs/backbones.md §1). ``T = 1`` leaves the logits as they are.

Alignment: entry ``l`` of the output is ``log π(y_l | y_<l)``, the log-prob of
token ``l`` itself, so the output lines up with ``input_ids`` and with the loss
mask the rollout collector builds. Entry 0 has no context and is 0; so is every
padded position and the first real token after left padding, which makes the
scores of a sequence independent of how it was padded (position ids are taken
from the attention mask, as ``generate`` does).

Throughput: with a ``score_mask`` (the trainer passes the loss mask) the LM
head and the log-softmax run only on the columns that predict wanted tokens,
through the model's own ``forward(logits_to_keep=<column indices>)``; a prompt
of hundreds of tokens then costs the backbone only. Models must accept
``logits_to_keep`` as an index tensor (every causal LM of transformers 5).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from agentcredit.rollout.admissible import restrict_logits

# Rows of logits turned into float32 log-softmax statistics at once: 2**25
# floats = 128 MiB, whatever the vocabulary (about 220 rows of a 152k Qwen vocab).
_LOGIT_ELEMENTS_PER_CHUNK = 2**25


def logprob_entropy_rows(
    logits: Tensor, targets: Tensor, with_entropy: bool, allowed: Tensor | None = None,
    temperature: float = 1.0,
) -> tuple[Tensor, Tensor | None]:
    """Log-prob of ``targets`` and entropy for each row of ``logits`` [N, V], in float32.

    Works through the rows in chunks so only one chunk's float32 copy and
    ``exp`` temporaries exist at a time; a full ``log_softmax`` over [N, V]
    is never materialised.

    ``allowed`` ``[N, K]`` (−1 padded; ``rollout.admissible``) renormalises each
    restricted row over its allowed ids: log-prob and entropy are those of
    ``p̃``, the distribution admissible decoding samples from. ``temperature`` ``T`` scales
    the logits first: the statistics are those of ``softmax(z / T)``.
    """
    if temperature <= 0:
        raise ValueError(f"temperature={temperature} must be > 0 (a greedy sampler records "
                         "untempered log-probs: score them at temperature 1)")
    n_rows, vocab = logits.shape
    rows_per_chunk = max(1, _LOGIT_ELEMENTS_PER_CHUNK // vocab)
    logprobs, entropies = [], []
    for start in range(0, n_rows, rows_per_chunk):
        chunk = logits[start : start + rows_per_chunk].float()  # [n, V]
        if temperature != 1.0:
            chunk = chunk / temperature
        if allowed is not None:
            chunk = restrict_logits(chunk, allowed[start : start + rows_per_chunk])
        log_norm = torch.logsumexp(chunk, dim=-1)  # [n]
        picked = chunk.gather(-1, targets[start : start + rows_per_chunk, None]).squeeze(-1)
        logprobs.append(picked - log_norm)
        if with_entropy:
            # H = log Z − Σ_v p_v z_v
            # (masked entries have p_v = 0; zeroing their −inf keeps 0·∞ out of the sum)
            probs = torch.softmax(chunk, dim=-1)
            finite = chunk.masked_fill(chunk == -torch.inf, 0.0)
            entropies.append(log_norm - (probs * finite).sum(-1))
    return torch.cat(logprobs), (torch.cat(entropies) if with_entropy else None)


def _score(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    micro_batch_size: int,
    requires_grad: bool,
    with_entropy: bool,
    allowed: Tensor | None,
    score_mask: Tensor | None,
    temperature: float,
) -> tuple[Tensor, Tensor | None]:
    if input_ids.dim() != 2 or input_ids.shape != attention_mask.shape:
        raise ValueError(
            f"input_ids {tuple(input_ids.shape)} and attention_mask "
            f"{tuple(attention_mask.shape)} must both be [B, L]"
        )
    if micro_batch_size < 1:
        raise ValueError(f"micro_batch_size={micro_batch_size} must be >= 1")
    device = next(model.parameters()).device
    batch, length = input_ids.shape

    logprob_parts, entropy_parts = [], []
    with torch.set_grad_enabled(requires_grad):
        for start in range(0, batch, micro_batch_size):
            rows = slice(start, start + micro_batch_size)
            ids = input_ids[rows].to(device)  # [b, L]
            mask = attention_mask[rows].to(device).long()
            b = ids.shape[0]
            # Token l is scored when it and its predecessor are real tokens (and it is wanted).
            wanted = torch.zeros_like(mask, dtype=torch.bool)
            wanted[:, 1:] = (mask[:, 1:] > 0) & (mask[:, :-1] > 0)
            if score_mask is not None:
                wanted &= score_mask[rows].to(device).bool()
            # Logit column c predicts token c + 1: the LM head runs on the columns some row
            # needs (all of them without a score mask), through the model's own forward.
            cols = wanted[:, 1:].any(0).nonzero().flatten() if score_mask is not None \
                else torch.arange(length - 1, device=device)
            logprobs = torch.zeros((b, length), device=device)
            entropies = torch.zeros((b, length), device=device)
            if cols.numel():
                position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
                logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids,
                               use_cache=False, logits_to_keep=cols).logits  # [b, k, V]
                k = cols.numel()
                sets = None
                if allowed is not None:
                    sets = allowed[rows][:, (cols + 1).cpu()].to(device).reshape(b * k, -1)
                lp, ent = logprob_entropy_rows(logits.reshape(b * k, -1),
                                               ids[:, cols + 1].reshape(-1), with_entropy, sets,
                                               temperature)
                keep = wanted[:, cols + 1]
                logprobs = logprobs.index_copy(1, cols + 1, torch.where(keep, lp.view(b, k), 0.0))
                if ent is not None:
                    entropies = entropies.index_copy(1, cols + 1,
                                                     torch.where(keep, ent.view(b, k), 0.0))
                del logits
            logprob_parts.append(logprobs)
            entropy_parts.append(entropies)

    out_device = input_ids.device
    logprobs = torch.cat(logprob_parts).to(out_device)
    entropies = torch.cat(entropy_parts).to(out_device) if with_entropy else None
    return logprobs, entropies


def token_logprobs(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    micro_batch_size: int,
    *,
    requires_grad: bool = False,
    allowed: Tensor | None = None,
    score_mask: Tensor | None = None,
    temperature: float = 1.0,
) -> Tensor:
    """Per-token log-probs ``log π(y_l | y_<l)`` of ``input_ids`` under ``model``.

    Args:
        model: a causal LM (``model(input_ids=, attention_mask=, position_ids=).logits``).
        input_ids: [B, L] token ids, left or right padded.
        attention_mask: [B, L], 1 for real tokens, 0 for padding.
        micro_batch_size: sequences per forward pass; the result does not
            depend on it (up to float rounding).
        requires_grad: run with autograd on (the PPO update). Off by default:
            scoring for ``ℓ^b``, ``ℓ_ref`` and ``ℓ^T`` runs under ``no_grad``.
            With it on, every micro-batch's graph is kept until backward, so
            the trainer passes one micro-batch at a time.
        allowed: ``[B, L, K]`` allowed ids of each token (−1 padded, aligned with
            ``input_ids``; ``rollout.admissible.allowed_tensor``): each token's
            log-prob is renormalised over its set, as admissible decoding sampled it.
            ``None``: the full vocabulary everywhere.
        score_mask: ``[B, L]`` bool, the tokens whose log-probs are wanted (the
            trainer passes the loss mask): the LM head then runs only on the
            columns that predict them, and every other entry is 0. ``None``: all.
        temperature: ``T`` > 0; the log-probs are those of ``softmax(z / T)``.

    Returns:
        float32 [B, L] on ``input_ids``' device; entry 0, padded positions and
        the first real token after left padding are 0. The model's train/eval
        mode is left as the caller set it.
    """
    logprobs, _ = _score(
        model, input_ids, attention_mask, micro_batch_size, requires_grad, with_entropy=False,
        allowed=allowed, score_mask=score_mask, temperature=temperature,
    )
    return logprobs


def token_logprobs_and_entropy(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    micro_batch_size: int,
    *,
    requires_grad: bool = False,
    allowed: Tensor | None = None,
    score_mask: Tensor | None = None,
    temperature: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """``token_logprobs`` plus the entropy of each token's predictive distribution.

    Entry ``l`` of the entropy is ``H(π(· | y_<l))``, the distribution token
    ``l`` was drawn from (tempered, and renormalised over ``allowed`` when given), with the same
    zeros as the log-probs. Costs one extra
    softmax per logit chunk, no extra forward pass.

    Returns:
        ``(logprobs, entropies)``, both float32 [B, L].
    """
    logprobs, entropies = _score(
        model, input_ids, attention_mask, micro_batch_size, requires_grad, with_entropy=True,
        allowed=allowed, score_mask=score_mask, temperature=temperature,
    )
    assert entropies is not None
    return logprobs, entropies
