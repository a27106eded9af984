"""Search QA tasks by split: generated questions over the generated world (the default), or
a FlashRAG dataset folder.

A task's ``instruction`` is the question, its ``task_type`` the question type
(``questions.QUESTION_TYPES``; for a FlashRAG folder, the folder's name, ``nq``), and its
payload the corpus and retrieval specs (``sources.py``) and the question with its
golden answers (``Question.to_json``).

Generated questions are kept only when the local BM25 index returns each hop's passage
among the top ``topk`` for its title, so every kept question can be solved by searching
(``expert.py`` does it). Splits are by entity (``world.py``): ``train``, ``valid``,
``test``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from agentcredit.config.schema import ConfigError, validate
from agentcredit.envs.base import Task
from agentcredit.envs.searchqa.flashrag import SPLIT_FILES, load_qa
from agentcredit.envs.searchqa.questions import Question, generate_questions
from agentcredit.envs.searchqa.sources import bm25_index, generated_world

SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class SearchQAConfig:
    """The search QA environment: its corpus, questions, retrieval and turn limit."""

    num_passages: int = 10_000
    """Passages of the generated world (10,000 by default; 100,000 work)."""
    seed: int = 0
    """Seeds the generated world and its questions."""
    train_questions: int = 1000
    """Generated questions drawn for ``train`` (fewer are kept when too few are solvable)."""
    valid_questions: int = 200
    """Generated questions drawn for ``valid``."""
    test_questions: int = 200
    """Generated questions drawn for ``test``."""
    topk: int = 3
    """Passages returned per search (Search-R1: 3)."""
    max_turns: int = 4
    """Responses per episode, searches and invalid ones included (Search-R1: 4)."""
    max_query_chars: int = 1000
    """Longer queries are refused with an observation (it costs the turn)."""
    data_dir: str = ""
    """A FlashRAG dataset folder (``train.jsonl``, ``dev.jsonl``, ``test.jsonl``) to use
    instead of generated questions; needs ``corpus_file`` or ``retriever_url``."""
    corpus_file: str = ""
    """A FlashRAG corpus jsonl (``id``, ``contents``) searched with local BM25."""
    retriever_url: str = ""
    """A Search-R1 retrieval server (``http://127.0.0.1:8000/retrieve``); replaces BM25."""
    retriever_timeout_s: float = 10.0
    """Seconds one request to the retrieval server may take, from connecting to the last byte."""
    retriever_retries: int = 3
    """Retries of a failed request, with doubling back-off from 0.5 s."""

    _limits: ClassVar[dict[str, tuple]] = {
        "num_passages": (100, None), "seed": (0, None), "train_questions": (0, None),
        "valid_questions": (0, None), "test_questions": (0, None), "topk": (1, None),
        "max_turns": (1, None), "max_query_chars": (1, None),
        "retriever_timeout_s": (0.0, None, "open"), "retriever_retries": (0, None)}

    def __post_init__(self) -> None:
        validate(self)
        if self.data_dir and not (self.corpus_file or self.retriever_url):
            raise ConfigError(f"SearchQAConfig.data_dir = {self.data_dir!r} needs passages to "
                              "search: set corpus_file (a FlashRAG corpus jsonl) or "
                              "retriever_url (a Search-R1 retrieval server)")
        if self.retriever_url and not self.retriever_url.startswith(("http://", "https://")):
            raise ConfigError(f"SearchQAConfig.retriever_url = {self.retriever_url!r} must be "
                              "an http(s) URL such as http://127.0.0.1:8000/retrieve")

    def corpus_spec(self) -> dict[str, Any]:
        if self.corpus_file:
            return {"kind": "flashrag", "path": str(Path(self.corpus_file).resolve())}
        return {"kind": "generated", "num_passages": self.num_passages, "seed": self.seed}

    def retrieval_spec(self) -> dict[str, Any]:
        if self.retriever_url:
            return {"kind": "server", "url": self.retriever_url,
                    "timeout_s": self.retriever_timeout_s, "retries": self.retriever_retries}
        return {"kind": "bm25"}


def question_tasks(questions: list[Question], split: str, config: SearchQAConfig,
                   prefix: str = "searchqa") -> list[Task]:
    """One task per question, ids ``<prefix>-<split>-<index>``."""
    corpus, retrieval = config.corpus_spec(), config.retrieval_spec()
    return [Task(task_id=f"{prefix}-{split}-{i:05d}", env="searchqa", split=split,
                 instruction=q.text, task_type=q.qtype,
                 payload={"corpus": corpus, "retrieval": retrieval, "question": q.to_json()})
            for i, q in enumerate(questions)]


def solvable(question: Question, config: SearchQAConfig) -> bool:
    """Each hop's passage is in the BM25 top ``topk`` for its title."""
    index = bm25_index(config.corpus_spec())
    return all(int(h.doc_id) in index.ranked(h.title, config.topk) for h in question.hops)


@lru_cache(maxsize=16)
def _generated(config: SearchQAConfig, split: str) -> tuple[Question, ...]:
    world = generated_world(config.num_passages, config.seed)
    count = {"train": config.train_questions, "valid": config.valid_questions,
             "test": config.test_questions}[split]
    questions = generate_questions(world, split, count, config.seed) if count else []
    return tuple(q for q in questions if solvable(q, config))


def flashrag_questions(data_dir: str | Path, split: str) -> list[Question]:
    """The questions of a FlashRAG dataset folder's split file (task type: the folder name)."""
    folder = Path(data_dir)
    path = folder / SPLIT_FILES[split]
    return [Question(r.question, r.golden_answers, folder.name, (), ()) for r in load_qa(path)]


def build_tasks(split: str, config: SearchQAConfig = SearchQAConfig()) -> list[Task]:
    """The tasks of ``split`` (``train``, ``valid`` or ``test``)."""
    if split not in SPLITS:
        raise ValueError(f"unknown searchqa split {split!r}; expected one of {SPLITS}")
    if config.data_dir:
        return question_tasks(flashrag_questions(config.data_dir, split), split, config)
    return question_tasks(list(_generated(config, split)), split, config)
