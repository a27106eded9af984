"""Loaders for the data Search-R1 users already hold, in FlashRAG's jsonl formats.

- QA files: one JSON object a line with ``id``, ``question`` and ``golden_answers`` (a
  list of strings; a single string is accepted). FlashRAG names a dataset's splits
  ``train.jsonl``, ``dev.jsonl`` and ``test.jsonl``.
- Corpus files (``wiki-18.jsonl``): one JSON object a line with ``id`` and ``contents``,
  the title on the first line of ``contents``.

Blank lines are skipped; any other bad line stops the load with ``FlashRAGFormatError``
naming its file and line number and what it should hold.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentcredit.envs.searchqa.corpus import Passage

#: our split -> FlashRAG's file name.
SPLIT_FILES = {"train": "train.jsonl", "valid": "dev.jsonl", "test": "test.jsonl"}


class FlashRAGFormatError(ValueError):
    """A FlashRAG file line that is not what the format holds; the message names the line."""


@dataclass(frozen=True)
class QARecord:
    """One question of a FlashRAG QA file."""

    qid: str
    question: str
    golden_answers: tuple[str, ...]


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line, read as a stream."""
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if line.strip():
                    yield number, _record(path, number, line)
    except OSError as err:
        raise FileNotFoundError(f"cannot read {path}: {err.strerror}; pass an existing "
                                "FlashRAG jsonl file") from None
    except UnicodeDecodeError as err:
        raise FlashRAGFormatError(f"{path} is not UTF-8 text ({err.reason})") from None


def _record(path: Path, number: int, line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise FlashRAGFormatError(f"{path}:{number} is not a JSON object ({err.msg})") from None
    if not isinstance(record, dict):
        raise FlashRAGFormatError(f"{path}:{number} holds {type(record).__name__}, "
                                  "expected an object")
    return record


def load_qa(path: str | Path) -> list[QARecord]:
    """The questions of a FlashRAG QA file."""
    path = Path(path)
    out = []
    for number, record in _records(path):
        answers = record.get("golden_answers")
        if isinstance(answers, str):
            answers = [answers]
        if not isinstance(record.get("question"), str) or not isinstance(answers, list) \
                or not answers or not all(isinstance(a, str) for a in answers):
            raise FlashRAGFormatError(f"{path}:{number} needs 'question' (text) and "
                                      "'golden_answers' (a non-empty list of text); got keys "
                                      f"{sorted(record)}")
        out.append(QARecord(str(record.get("id", number)), record["question"], tuple(answers)))
    return out


def load_corpus(path: str | Path) -> list[Passage]:
    """The passages of a FlashRAG corpus file."""
    path = Path(path)
    out = []
    for number, record in _records(path):
        if not isinstance(record.get("contents"), str):
            raise FlashRAGFormatError(f"{path}:{number} needs 'contents' (the title, a "
                                      f"newline, the text); got keys {sorted(record)}")
        out.append(Passage.from_contents(str(record.get("id", number)), record["contents"]))
    return out
