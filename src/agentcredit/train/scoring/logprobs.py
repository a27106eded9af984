"""Log-probs and entropies of sampled tokens from the LM head's logits (docs/backbones.md §1).

``logprob_entropy_rows`` turns logit rows into ``log π(y | ·)`` of each row's target and the
entropy ``H(π(· | ·))``, in float32, under the policy's temperature and, with admissible
decoding, renormalised over each token's allowed ids. Every pass that scores tokens reaches
it through the one tree forward (``scoring/tree_forward.py``), which runs the LM head only on
the columns that predict scored tokens.

Temperature: the trainer passes ``RolloutConfig.policy_temperature`` to every pass, so the
statistics are those of ``softmax(z / T)``, the distribution rollouts at that temperature
were sampled from (``rollout.policy``), and PPO trains the policy that sampled the batch.
``T = 1`` leaves the logits as they are.
"""

from __future__ import annotations

import torch
from torch import Tensor

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
