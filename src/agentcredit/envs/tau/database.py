"""A tau2 database for one rollout: copy-on-write over the shared initial database.

tau2 gives each simulation a fresh copy of the domain database. A deep copy
of the airline database takes ~150 ms, so instead a ``Database`` reads the
shared initial records and copies a record only when a tool is about to
change it (``Table.edit``); new records (a booked reservation) go to the
overlay too. A reset is then free, and the rollout's whole difference from
the initial state is the overlay (``changes``).

The tools read with ``table[key]`` and never mutate what that returns: a
record is mutated only through ``edit(key)``, after every check of the call
has passed, so a call that fails leaves the database as it was. The tests
check that the shared records equal ``db.json`` after every tool call of
every task.

``fingerprint()`` plays the role of tau2's database hash: two databases over
the same initial records are equal iff their fingerprints are.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any


def canonical_json(value: Any) -> str:
    """One text per value: sorted keys, no whitespace (what fingerprints and snapshots hash)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Table(Mapping):
    """One table (``orders``, ``flights`` …): the shared records plus this rollout's edits.

    Iteration follows the initial file's order, then records added in this rollout, in
    the order they were added (a plain dict copy of the table would iterate alike).
    """

    def __init__(self, base: dict[str, Any]):
        self._base = base
        self._edited: dict[str, Any] = {}

    def __getitem__(self, key: Any) -> Any:
        if key in self._edited:
            return self._edited[key]
        return self._base[key]

    def __contains__(self, key: Any) -> bool:
        return key in self._edited or key in self._base

    def __iter__(self) -> Iterator[str]:
        yield from self._base
        yield from (key for key in self._edited if key not in self._base)

    def __len__(self) -> int:
        return len(self._base) + sum(key not in self._base for key in self._edited)

    def edit(self, key: str) -> Any:
        """The record ``key``, copied into this rollout on first edit; mutate only what this
        returns."""
        if key not in self._edited:
            self._edited[key] = copy.deepcopy(self._base[key])
        return self._edited[key]

    def add(self, key: str, record: Any) -> None:
        """Insert a new record ``key``."""
        self._edited[key] = record

    def changes(self) -> dict[str, Any]:
        """The records of this table that differ from the initial ones (new records included)."""
        return {key: value for key, value in self._edited.items()
                if key not in self._base or value != self._base[key]}


class Database:
    """A domain database for one rollout (see the module notes).

    Args:
        base: the shared initial database, ``table -> key -> record``; never mutated.
    """

    def __init__(self, base: Mapping[str, dict[str, Any]]):
        self.tables = {name: Table(records) for name, records in base.items()}

    def __getitem__(self, table: str) -> Table:
        return self.tables[table]

    def changes(self) -> dict[str, dict[str, Any]]:
        """``table -> key -> record`` for every record that differs from the initial database."""
        return {name: diff for name, table in self.tables.items() if (diff := table.changes())}

    def fingerprint(self) -> str:
        """SHA-256 of the canonical changes: equal iff the two databases are equal."""
        return hashlib.sha256(canonical_json(self.changes()).encode()).hexdigest()
