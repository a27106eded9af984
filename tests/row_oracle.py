"""The tests' independent scorer: every row alone, one plain forward, the whole vocabulary.

It shares no code with ``train/scoring/``: no prefix trees, no past keys and values, no
``logits_to_keep``, no chunking; the log-softmax and the entropy are torch's own. Every pass
of the trainer is checked against it.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def row_logprobs(model: nn.Module, input_ids: Tensor, attention_mask: Tensor, *,
                 allowed: Tensor | None = None, score_mask: Tensor | None = None,
                 temperature: float = 1.0, requires_grad: bool = False
                 ) -> tuple[Tensor, Tensor]:
    """``(log π(y_l | y_<l), H(π(· | y_<l)))`` ``[B, L]`` of each row's real tokens.

    A row's real tokens (its 1s in ``attention_mask``, one contiguous run, left or right
    padded) run alone at positions ``0 … n − 1``; the first of them and every padded column
    get 0, and so does every column outside ``score_mask`` when it is given. ``allowed``
    ``[B, L, K]`` (−1 padded; a column of all −1 unrestricted) renormalises each token over
    its set; ``temperature`` scales the logits first.
    """
    rows_lp, rows_ent = [], []
    with torch.set_grad_enabled(requires_grad):
        for i in range(input_ids.shape[0]):
            columns = attention_mask[i].nonzero().flatten()
            ids = input_ids[i, columns]
            logits = model(input_ids=ids[None], use_cache=False).logits[0, :-1].float()
            logits = logits / temperature  # [n − 1, V]
            if allowed is not None:
                sets = allowed[i, columns[1:]]  # [n − 1, K]
                keep = torch.zeros(logits.shape, dtype=torch.bool)
                for position, row in enumerate(sets):
                    ids_allowed = row[row >= 0]
                    keep[position, ids_allowed if len(ids_allowed) else slice(None)] = True
                logits = logits.masked_fill(~keep, -torch.inf)
            log_p = torch.log_softmax(logits, dim=-1)
            lp = log_p.gather(1, ids[1:, None])[:, 0]
            ent = -(log_p.exp() * log_p.nan_to_num(neginf=0.0)).sum(-1)
            rows_lp.append((i, columns[1:], lp))
            rows_ent.append((i, columns[1:], ent))
        logprobs = _placed(rows_lp, input_ids.shape)
        entropies = _placed(rows_ent, input_ids.shape)
    if score_mask is not None:
        logprobs = logprobs * score_mask.bool()
        entropies = entropies * score_mask.bool()
    return logprobs, entropies


def _placed(parts: list[tuple[int, Tensor, Tensor]], shape: torch.Size) -> Tensor:
    """Each row's values at its columns of a ``shape`` tensor of zeros (differentiable)."""
    return torch.stack([torch.zeros(shape[1], dtype=values.dtype).index_put((columns,), values)
                        for _, columns, values in parts])
