"""Top-k selection over BM25 scores, shared by WebShop's search and searchqa's retriever."""

from __future__ import annotations

import numpy as np


def top_k_positive(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` highest positive ``scores`` ``[N]``, best first, ties by index.

    Deterministic: among equal scores the lower index (earlier document) wins, also at
    the ``k``-th place. Fewer than ``k`` come back when fewer scores are positive.
    """
    if k < 1:
        return []
    hits = np.flatnonzero(scores > 0)
    if hits.size > k:
        # keep every document tied with the k-th score so the tie-break below stays exact
        kth = np.partition(scores[hits], hits.size - k)[hits.size - k]
        hits = hits[scores[hits] >= kth]
    order = np.lexsort((hits, -scores[hits]))
    return [int(i) for i in hits[order[:k]]]
