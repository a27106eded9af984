"""The ``env.searchqa`` settings: the corpus, questions, retrieval and turn limit (no engine is
imported here, so the run config can hold them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from agentcredit.config.schema import SEED_MAX, ConfigError, validate


@dataclass(frozen=True)
class SearchQAConfig:
    """The search QA environment: its corpus, questions, retrieval and turn limit."""

    num_passages: int = 10_000
    """Passages of the generated world (10,000 by default; 100,000 work; 100 to a million)."""
    seed: int = 0
    """Seeds the generated world and its questions."""
    train_questions: int = 1000
    """Generated questions drawn for ``train`` (fewer are kept when too few are solvable); at
    most 100,000."""
    valid_questions: int = 200
    """Generated questions drawn for ``valid``; at most 100,000."""
    test_questions: int = 200
    """Generated questions drawn for ``test``; at most 100,000."""
    topk: int = 3
    """Passages returned per search (Search-R1: 3), 1 to 50: every passage returned lengthens
    the next prompt, and a few dozen fill a small model's context."""
    max_turns: int = 4
    """Responses per episode, searches and invalid ones included (Search-R1: 4); at most
    100."""
    max_query_chars: int = 1000
    """Longer queries are refused with an observation (it costs the turn); at most 100,000."""
    data_dir: str = ""
    """A FlashRAG dataset folder (``train.jsonl``, ``dev.jsonl``, ``test.jsonl``) to use
    instead of generated questions; needs ``corpus_file`` or ``retriever_url``."""
    corpus_file: str = ""
    """A FlashRAG corpus jsonl (``id``, ``contents``) searched with local BM25."""
    retriever_url: str = ""
    """A Search-R1 retrieval server (``http://127.0.0.1:8000/retrieve``, parsed at load);
    replaces BM25."""
    retriever_timeout_s: float = 10.0
    """Seconds one request to the retrieval server may take, from connecting to the last byte;
    more than 0, at most 3600."""
    retriever_retries: int = 3
    """Retries of a failed request, with doubling back-off from 0.5 s; at most 12, so the
    back-off one request can plan (0.5 s x (2^12 - 1), 34 minutes) stays bounded."""
    answer_scope: Literal["all", "decided"] = "all"
    """What ``<answer>`` commits in VICT's verifier: ``all`` (every atom, so the answer step is
    a witness of the hops too) or ``decided`` (only the ``answer`` atom)."""

    _limits: ClassVar[dict[str, tuple]] = {
        "num_passages": (100, 1_000_000), "seed": (0, SEED_MAX),
        "train_questions": (0, 100_000), "valid_questions": (0, 100_000),
        "test_questions": (0, 100_000), "topk": (1, 50), "max_turns": (1, 100),
        "max_query_chars": (1, 100_000), "retriever_timeout_s": (0.0, 3600.0, "open"),
        "retriever_retries": (0, 12)}
    _urls: ClassVar[tuple[str, ...]] = ("retriever_url",)

    def __post_init__(self) -> None:
        validate(self)
        if self.data_dir and not (self.corpus_file or self.retriever_url):
            raise ConfigError(f"SearchQAConfig.data_dir = {self.data_dir!r} needs passages to "
                              "search: set corpus_file (a FlashRAG corpus jsonl) or "
                              "retriever_url (a Search-R1 retrieval server)")

    def corpus_spec(self) -> dict[str, Any]:
        if self.corpus_file:
            return {"kind": "flashrag", "path": str(Path(self.corpus_file).resolve())}
        return {"kind": "generated", "num_passages": self.num_passages, "seed": self.seed}

    def retrieval_spec(self) -> dict[str, Any]:
        if self.retriever_url:
            return {"kind": "server", "url": self.retriever_url,
                    "timeout_s": self.retriever_timeout_s, "retries": self.retriever_retries}
        return {"kind": "bm25"}
