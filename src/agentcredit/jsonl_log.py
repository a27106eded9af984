"""Append-only JSONL logs that survive a kill: ``metrics.jsonl`` and ``ledger.jsonl``.

A run appends whole lines with one ``os.write`` loop and an ``fsync``, so a
SIGKILL can leave at most one partial line at the end of a file.
``repair_torn_tail`` cuts that line; ``truncate_lines`` rolls a log back to the
number of lines a checkpoint recorded, which is how a resumed run drops what
was logged after its checkpoint. Every line is strict JSON: a non-finite number
raises before anything is written (``finite_or_null`` turns metrics' NaN into
``null`` first).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Self

from agentcredit.disk_full import writing


class DamagedLog(ValueError):
    """A log line that is not JSON and is not a torn last line; the message names the line."""


class JsonlLog:
    """An append-only, crash-safe JSONL file.

    Usage::

        with JsonlLog(run_dir / "ledger.jsonl") as log:
            log.append(rows, update=7)

    Opening cuts a torn last line. ``append`` adds the keyword fields to every row;
    rows must be JSON-serialisable with finite numbers, and a bad row raises
    ``ValueError`` before anything is written.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_torn_tail(self.path)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, rows: Iterable[Mapping[str, Any]], **common: Any) -> int:
        """Write ``rows`` (each merged with ``common``) as whole lines; returns how many."""
        if self._fd is None:
            raise ValueError(f"log {self.path} is closed; open a new JsonlLog")
        lines = [json.dumps({**row, **common}, allow_nan=False) + "\n" for row in rows]
        if not lines:
            return 0
        view = memoryview("".join(lines).encode("utf-8"))
        with writing(self.path):
            while view:  # os.write may write less than asked; finish the rest
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)
        return len(lines)

    def close(self) -> None:
        """Close the file (appending afterwards raises)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def finite_or_null(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with every non-finite float replaced by ``None``, listed under ``nonfinite``."""
    bad = [k for k, v in record.items() if isinstance(v, float) and not math.isfinite(v)]
    if not bad:
        return dict(record)
    return {**{k: (None if k in bad else v) for k, v in record.items()}, "nonfinite": bad}


def repair_torn_tail(path: str | Path) -> int:
    """Cut a trailing partial line (no final newline) that a kill left; returns the bytes cut."""
    path = Path(path)
    if not path.exists():
        return 0
    with open(path, "rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return 0
        end, block, keep = size, 1 << 16, 0
        while end > 0:  # scan back to the last newline in blocks
            start = max(0, end - block)
            handle.seek(start)
            cut = handle.read(end - start).rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
        return size - keep


def count_lines(path: str | Path) -> int:
    """The number of complete (newline-terminated) lines of ``path``; 0 if it does not exist."""
    path = Path(path)
    if not path.exists():
        return 0
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def truncate_lines(path: str | Path, keep: int) -> None:
    """Keep the first ``keep`` complete lines of ``path`` (atomic rewrite); a no-op if absent."""
    path = Path(path)
    if not path.exists():
        return
    with open(path, "rb") as handle:
        lines = handle.read().split(b"\n")[:keep]
    tmp = path.with_name(path.name + ".tmp")
    with writing(tmp):
        tmp.write_bytes(b"".join(line + b"\n" for line in lines))
    os.replace(tmp, path)


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """The records of ``path``, in order; a torn last line is skipped, any other bad line raises
    ``DamagedLog``."""
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")[:-1]  # after the last newline: "" or a torn record
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as err:
            raise DamagedLog(f"{path}:{number} is not a JSON record ({err.msg}); the file is "
                             "damaged beyond a torn last line") from None
