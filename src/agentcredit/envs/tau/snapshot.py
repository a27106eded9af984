"""The tau state snapshot ``Φ`` (docs/vict.md §4.1) and the original verifier ``V`` over it.

A snapshot is a flat mapping (key: value):

- ``db:<table>/<key>``: canonical JSON of every record that differs from the initial
  database (a new reservation included); records not listed are as in ``db.json``.
- ``told:<string>``: for each ``communicate_info`` string of the task, whether an agent
  message has held it so far (tau2's COMMUNICATE test).
- ``stopped``: whether the conversation ended by a stop (the user's stop token or the
  agent's ``###STOP###``). Endings by a limit (steps, tool errors) or by a user that
  could not answer leave it False: they earn nothing, and an invalid action, which may hit
  a limit, never changes the snapshot.

``V(state)`` is tau2's task reward recomputed from these: the database part
from the ``db:`` records, the communicated strings from ``told:``, and 0 unless
``stopped``. NL assertions are not in a snapshot; ``V``
skips them, as the environment does without a judge.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from agentcredit.envs.tau.database import Database, canonical_json
from agentcredit.envs.tau.reward import (
    COMMUNICATE,
    DB,
    REWARDED_ENDINGS,
    communicated,
    golden_fingerprint,
    reward_basis,
)

DB_PREFIX, TOLD_PREFIX, STOPPED = "db:", "told:", "stopped"


def record_key(table: str, key: str) -> str:
    """The snapshot key of record ``key`` of ``table``."""
    return f"{DB_PREFIX}{table}/{key}"


def state_snapshot(db: Database, task: dict[str, Any], agent_messages: Sequence[str],
                   ending: str) -> dict[str, Any]:
    """``Φ`` of a conversation (module notes)."""
    state: dict[str, Any] = {record_key(table, key): canonical_json(record)
                             for table, records in db.changes().items()
                             for key, record in records.items()}
    state.update({TOLD_PREFIX + info: said
                  for info, said in communicated(task, agent_messages).items()})
    state[STOPPED] = ending in REWARDED_ENDINGS
    return state


def db_changes(state: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``table -> key -> record`` of the ``db:`` entries of ``state``."""
    changes: dict[str, dict[str, Any]] = {}
    for name, value in state.items():
        if name.startswith(DB_PREFIX):
            table, key = name[len(DB_PREFIX):].split("/", 1)
            changes.setdefault(table, {})[key] = json.loads(value)
    return changes


def state_fingerprint(state: Mapping[str, Any]) -> str:
    """The database fingerprint of ``state`` (equal to ``Database.fingerprint`` of its
    rollout)."""
    return hashlib.sha256(canonical_json(db_changes(state)).encode()).hexdigest()


def original_score(domain: str, task: dict[str, Any], state: Mapping[str, Any]) -> float:
    """``V``: tau2's reward of the conversation ``state`` records, NL assertions skipped."""
    if not state.get(STOPPED):
        return 0.0
    basis = reward_basis(task)
    if DB in basis and state_fingerprint(state) != golden_fingerprint(domain, task["id"]):
        return 0.0
    if COMMUNICATE in basis:
        infos = task["evaluation_criteria"].get("communicate_info") or []
        if not all(state.get(TOLD_PREFIX + info, False) for info in infos):
            return 0.0
    return 1.0
