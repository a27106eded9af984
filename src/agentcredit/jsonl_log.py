"""Append-only JSONL logs that survive a kill: ``metrics.jsonl`` and ``ledger.jsonl``.

A run appends whole lines with one ``os.write`` loop and an ``fsync``, so a
SIGKILL can leave at most one partial line at the end of a file.
``repair_torn_tail`` cuts that line; ``truncate_lines`` rolls a log back to the
number of lines a checkpoint recorded, which is how a resumed run drops what
was logged after its checkpoint. Every line is strict JSON: a non-finite number
raises before anything is written (``finite_or_null`` turns metrics' NaN into
``null`` first).

A log is a run file (``run/safe_files.py``): opened without following a link, written
only while it has one name, replaced through a temporary name created exclusively, and
read within ``READ_LIMIT`` bytes, each line UTF-8 JSON within ``bounded_json``'s bounds
(no NaN), so a damaged middle line is named, never an internal error.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Self

from agentcredit.disk_full import writing
from agentcredit.envs.bounded_json import JsonRefused, loads
from agentcredit.run.safe_files import open_regular, read_regular, write_new

READ_LIMIT = 1 << 30
"""Largest log read back (as the report reads one)."""


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
        self._fd: int | None = open_regular(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

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
    with os.fdopen(open_regular(path, os.O_RDWR), "rb+") as handle:
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
    with os.fdopen(open_regular(path), "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def truncate_lines(path: str | Path, keep: int) -> None:
    """Keep the first ``keep`` complete lines of ``path`` (atomic rewrite); a no-op if absent."""
    path = Path(path)
    if not path.exists():
        return
    lines = _read(path).split(b"\n")[:keep]
    tmp = path.with_name(path.name + ".tmp")
    with writing(tmp):
        write_new(path, b"".join(line + b"\n" for line in lines), tmp)


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """The records of ``path``, in order (``numbered_records`` without the line numbers)."""
    return (record for _, record in numbered_records(path))


def numbered_records(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` of each line of ``path``, in order; a torn last line and
    blank lines are skipped, any other bad line (not UTF-8, not JSON within
    ``bounded_json``'s bounds, NaN, not an object) raises ``DamagedLog`` naming it.

    Raises:
        UnsafeRunFile: ``path`` is a link, a special file or over ``READ_LIMIT`` bytes.
    """
    lines = _read(path).split(b"\n")[:-1]  # after the last newline: b"" or a torn record
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = loads(line)
        except JsonRefused as err:
            raise DamagedLog(f"{path}:{number} is not a JSON record (the line {err}); the "
                             "file is damaged beyond a torn last line") from None
        if not isinstance(record, dict):
            raise DamagedLog(f"{path}:{number} is not a JSON record (the line is a JSON "
                             f"{type(record).__name__}); the file is damaged beyond a torn last "
                             "line")
        yield number, record


def _read(path: str | Path) -> bytes:
    """The bytes of the log ``path`` (a regular file of at most ``READ_LIMIT`` bytes)."""
    return read_regular(path, READ_LIMIT)
