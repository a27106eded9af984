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

from functools import lru_cache
from pathlib import Path

from agentcredit.envs.base import Task
from agentcredit.envs.searchqa.flashrag import SPLIT_FILES, load_qa
from agentcredit.envs.searchqa.options import SearchQAConfig
from agentcredit.envs.searchqa.questions import Question, generate_questions
from agentcredit.envs.searchqa.sources import bm25_index, generated_world

SPLITS = ("train", "valid", "test")


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
