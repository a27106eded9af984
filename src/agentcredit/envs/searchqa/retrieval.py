"""Retrievers: a local BM25 index (the default) and the contract every retriever keeps.

A retriever maps a query to at most ``k`` passages, best first. It raises
``RetrievalError`` (never anything else) when it cannot answer; the environment
turns that into an observation, so a rollout never dies from its retriever.
The client of a Search-R1 retrieval server is in ``server.py``.

BM25 (``bm25s``, Lucene's variant, k1 = 1.5, b = 0.75) indexes a passage's title
and text. Documents and queries share one tokenizer: lower case, alphanumeric
runs, English function words dropped. Only passages with a positive score are
returned; ties go to the earlier passage, so results are deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

import bm25s

from agentcredit.envs.ranking import top_k_positive
from agentcredit.envs.searchqa.corpus import Passage

_TOKEN = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset([
    "a", "an", "the", "and", "or", "of", "in", "on", "at", "to", "by", "for", "with", "from",
    "as", "is", "was", "are", "were", "be", "been", "it", "its", "this", "that", "these",
    "those", "which", "who", "whom", "what", "when", "where", "how", "did", "does", "do"])


class RetrievalError(RuntimeError):
    """A retriever could not answer a query; the message says why, for the agent to read."""


class Retriever(Protocol):
    """Query -> passages."""

    def search(self, query: str, k: int) -> list[Passage]:
        """At most ``k`` passages for ``query``, best first; raises ``RetrievalError``."""


def bm25_tokens(text: str) -> list[str]:
    """The index terms of ``text``."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


class BM25Retriever:
    """A BM25 index over ``passages`` (see the module notes)."""

    def __init__(self, passages: Sequence[Passage]):
        if not passages:
            raise ValueError("BM25Retriever needs at least one passage; the corpus is empty")
        self.passages = tuple(passages)
        self._vocab: dict[str, int] = {}
        ids = [[self._vocab.setdefault(t, len(self._vocab))
                for t in bm25_tokens(f"{p.title} {p.text}")] for p in self.passages]
        self._bm25 = bm25s.BM25()
        self._bm25.index(bm25s.tokenization.Tokenized(ids=ids, vocab=self._vocab),
                         show_progress=False)

    def ranked(self, query: str, k: int) -> list[int]:
        """Indices of the ``k`` best passages with a positive score, ties by index."""
        terms = [self._vocab[t] for t in bm25_tokens(query) if t in self._vocab]
        if not terms:
            return []
        return top_k_positive(self._bm25.get_scores_from_ids(terms), k)

    def search(self, query: str, k: int) -> list[Passage]:
        return [self.passages[i] for i in self.ranked(query, k)]
