"""The credit ledger: every non-zero VICT correction, auditable (SPEC 4.7).

``ledger_rows`` turns one computation into rows, one per (step, atom) share of
a non-zero correction, with the SPEC 4.7 fields:

| field | meaning |
| --- | --- |
| ``method`` | ``vict`` or the control that produced the row |
| ``task_id``, ``group_id``, ``rollout``, ``step``, ``action`` | where the credit went |
| ``atom_id``, ``relation``, ``evidence_source`` | the proof: atom, witness relation(s), evidence |
| ``delta_hat`` | ``δ̂_{i,j}``, the atom's normalised marginal |
| ``witness_weight``, ``witness_share`` | ``ω_{i,t,j}`` and ``ω_{i,t,j} / Z_{i,j}`` |
| ``atom_credit`` | ``δ̂_{i,j} · ω_{i,t,j} / Z_{i,j}``, this atom's part of ``A^VICT_{i,t}`` |
| ``vict_advantage`` | ``A^VICT_{i,t}`` (all atoms of the step) |
| ``correction`` | ``λ · clip(A^VICT_{i,t}, −c, c)``, the final correction of the step |
| ``base_advantage`` | ``A^base_{i,t}`` |

``LedgerWriter`` appends rows to ``ledger.jsonl`` so that a crash never leaves
a torn line: each batch of rows is one ``write`` of whole lines followed by
``flush`` + ``fsync``, and opening a ledger truncates a trailing partial line
that an earlier crash left (``read_ledger`` skips one too).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from agentcredit.credit.batch import CreditBatch
    from agentcredit.credit.vict.method import VictComputation

LEDGER_FIELDS = ("method", "task_id", "group_id", "rollout", "step", "action", "atom_id",
                 "relation", "evidence_source", "delta_hat", "witness_weight", "witness_share",
                 "atom_credit", "vict_advantage", "correction", "base_advantage")


def ledger_rows(batch: CreditBatch, computation: VictComputation) -> list[dict[str, Any]]:
    """One row per (step, atom) share of every step whose final correction is non-zero."""
    correction = computation.correction.tolist()
    vict = computation.vict.tolist()
    base = computation.base.tolist()
    group_ids = batch.group_ids.tolist()
    traces = batch.traces
    rows = []
    for c in computation.contributions:
        if correction[c.flat_step] == 0.0:
            continue
        trace = traces[c.rollout]
        rows.append({
            "method": computation.rule.name,
            "task_id": trace.task_id,
            "group_id": group_ids[c.rollout],
            "rollout": c.rollout,
            "step": c.step,
            "action": trace.actions[c.step],
            "atom_id": c.atom_id,
            "relation": "+".join(c.relations),
            "evidence_source": "; ".join(c.sources),
            "delta_hat": c.delta_hat,
            "witness_weight": c.weight,
            "witness_share": c.share,
            "atom_credit": c.amount,
            "vict_advantage": vict[c.flat_step],
            "correction": correction[c.flat_step],
            "base_advantage": base[c.flat_step],
        })
    return rows


class LedgerWriter:
    """Append-only, crash-safe JSONL writer for ledger rows (``ledger.jsonl``).

    Usage::

        with LedgerWriter(run_dir / "ledger.jsonl") as ledger:
            ledger.append(result.ledger_rows, update=step)

    ``append`` adds the keyword fields (``update=…``) to every row. Rows must be
    JSON-serialisable with finite numbers; a bad row raises before anything is
    written.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_torn_tail(self.path)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, rows: Iterable[Mapping[str, Any]], **common: Any) -> int:
        """Write ``rows`` (each merged with ``common``) as whole lines; returns how many."""
        if self._fd is None:
            raise ValueError(f"ledger {self.path} is closed; open a new LedgerWriter")
        lines = [json.dumps({**row, **common}, allow_nan=False, sort_keys=False) + "\n"
                 for row in rows]
        if not lines:
            return 0
        data = "".join(lines).encode("utf-8")
        view = memoryview(data)
        while view:  # os.write may write less than asked; finish the rest
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)
        return len(lines)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def repair_torn_tail(path: str | Path) -> int:
    """Truncate a trailing partial line (no final newline) that a crash left; returns bytes cut."""
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
        # scan back to the last newline in blocks
        end, block = size, 1 << 16
        keep = 0
        while end > 0:
            start = max(0, end - block)
            handle.seek(start)
            chunk = handle.read(end - start)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
        return size - keep


def read_ledger(path: str | Path) -> Iterator[dict[str, Any]]:
    """The rows of a ledger, in order; a trailing partial line (a crash mid-write) is skipped."""
    with open(path, "rb") as handle:
        for line in handle:
            if not line.endswith(b"\n"):
                return
            yield json.loads(line)
