"""The tau verifier for VICT (docs/vict.md §4.1), built from the task's golden actions.

States are the engine's snapshots (``snapshot.py``: the changed ``db:`` records,
``told:`` flags, ``stopped``); evidence is ``seen:<id>``, set once an observation
(a tool result or a user message) shows the id.

Replaying the golden actions on a fresh database gives the golden diff (every
record they change) and, for each write action, the records it changed and the
ids it needed: the id-like values of its arguments (strings holding a digit)
that an earlier golden read result or the user's scenario shows, and the id of the user
the record belongs to (its ``user_id``, or the key of a ``users/`` record) when one of
those shows it: tau2's policy authenticates that user before any write, so the lookup that
showed the id is evidence on the write's path (the VICT paper's Table 17, step 1).

Atoms, ``atom`` (role, timing): status:

- ``reveal:<id>`` (prerequisite, on_evidence): SAT once an observation showed the id,
  else UNSAT. Irreversible; Level 2 (an adapter over observations).
- ``write:<table>/<key>`` (hard, online), one per record of the golden diff: SAT iff the
  record in the state equals the golden one, else UNSAT. Depends on the reveals its
  write actions need. Level 0 (a final-state difference).
- ``told:<string>`` (hard, online), tasks with COMMUNICATE in their basis: SAT once an
  agent message held the string (tau2's test). Irreversible; Level 2.
- ``commit`` (hard, terminal_only): SAT iff the conversation ended by a stop (user or
  agent) and every ``told:`` atom is SAT. Depends on every write and told atom.
  Irreversible; Level 0.
- ``no_extra_writes`` (penalty, online): VIOL iff the state changed a record outside the
  golden diff (a write the task forbids), else SAT. Level 0.

``F`` (``ConjunctiveAggregator``): 1 iff every hard atom is SAT and no penalty atom is
VIOL. With the database basis, the writes SAT and no extra write mean the changed
records equal the golden diff record for record, i.e. equal fingerprints; so
``F ≡ V`` (``snapshot.original_score``) on every state. Tasks whose basis lacks DB get
no write or penalty atoms.

Commits are write-tool calls; one finalises the write atoms of the records its
arguments name (``order_id`` -> ``orders/<id>``, ``reservation_id``, ``user_id``).

Mutations of a terminal state (docs/vict.md §4.2): ``alter_target_field`` (one field of
the first golden record the state holds), ``add_extra_write`` (a record outside the
golden diff changed), ``drop_communicated`` (the first ``told:`` flag cleared),
``end_unstopped`` (the conversation ended by a limit, not a stop).
"""

from __future__ import annotations

import json
from typing import Any

from agentcredit.envs.base import Task
from agentcredit.envs.tau.actions import ToolCall, parse_action
from agentcredit.envs.tau.database import Database, canonical_json
from agentcredit.envs.tau.domains import load_domain
from agentcredit.envs.tau.reward import (
    COMMUNICATE,
    DB,
    golden_actions,
    reward_basis,
)
from agentcredit.envs.tau.snapshot import DB_PREFIX, STOPPED, TOLD_PREFIX, original_score
from agentcredit.envs.tau.toolkit import TOOLKITS, call_tool, make_toolkit
from agentcredit.envs.tau.users import scenario_instructions
from agentcredit.verifier.aggregators import ConjunctiveAggregator
from agentcredit.verifier.atoms import Atom, State, Status, Verifier

SEEN = "seen:"
#: argument -> the table whose record of that id a write call finalises
RECORD_ARGUMENTS = {"order_id": "orders", "reservation_id": "reservations",
                    "user_id": "users"}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def golden_plan(domain: str, task: dict[str, Any]) -> tuple[dict[str, str], dict[str, set]]:
    """``(golden diff, needs)``: the golden diff as ``"<table>/<key>" -> canonical record``,
    and for each of its records the ids its write actions needed (module notes)."""
    db = Database(load_domain(domain).db)
    toolkit = make_toolkit(domain, db)
    instructions = scenario_instructions(task)
    shown = [str(instructions.get("reason_for_call") or ""),
             str(instructions.get("known_info") or "")]
    needs: dict[str, set] = {}
    for action in golden_actions(task):
        before = _records(db)
        outcome = call_tool(toolkit, action["name"], dict(action["arguments"]))
        if action["name"] in TOOLKITS[domain].WRITE_TOOLS:
            after = _records(db)
            ids = {s for s in _strings(action["arguments"])
                   if any(c.isdigit() for c in s) and any(s in text for text in shown)}
            for key in set(before) | set(after):
                if before.get(key) != after.get(key):
                    owner = _owner(key, after.get(key) or before[key])
                    shown_owner = {owner} if owner and any(owner in t for t in shown) else set()
                    needs.setdefault(key, set()).update(ids | shown_owner)
        else:
            shown.append(outcome.content)
    diff = _records(db)
    return diff, {key: ids for key, ids in needs.items() if key in diff}


def _owner(key: str, record: str) -> str | None:
    """The user a changed record belongs to (its ``user_id``; a ``users/`` record is its own
    key): tau2's policy authenticates that user before any write (the VICT paper's Table 17,
    step 1), so the observation that showed the id is evidence on the write's path."""
    table, _, name = key.partition("/")
    if table == "users":
        return name
    owner = json.loads(record).get("user_id")
    return owner if isinstance(owner, str) else None


def _records(db: Database) -> dict[str, str]:
    return {f"{table}/{key}": canonical_json(record)
            for table, records in db.changes().items() for key, record in records.items()}


def _status(ok: bool) -> Status:
    return Status.SAT if ok else Status.UNSAT


def build_atoms(domain: str, task: dict[str, Any]) -> tuple[Atom, ...]:
    """The atoms of one tau2 task (module table)."""
    basis = reward_basis(task)
    atoms: list[Atom] = []
    diff, needs = golden_plan(domain, task) if DB in basis else ({}, {})
    for item in sorted({i for ids in needs.values() for i in ids}):
        atoms.append(Atom(f"reveal:{item}",
                          lambda s, e, key=SEEN + item: _status(bool(e.get(key))),
                          "on_evidence", (), (SEEN + item,), "prerequisite",
                          audit_source=f"an observation showed {item!r}", irreversible=True,
                          level=2))
    writes = []
    for record in sorted(diff):
        var = DB_PREFIX + record
        atom = Atom(f"write:{record}",
                    lambda s, e, var=var, want=diff[record]: _status(s.get(var) == want),
                    "online", tuple(f"reveal:{i}" for i in sorted(needs.get(record, ()))),
                    (var,), "hard", audit_source=f"golden diff: record {record}", level=0)
        atoms.append(atom)
        writes.append(atom.atom_id)
    told = []  # the snapshot's told:<string> flag is also the atom's id
    if COMMUNICATE in basis:
        for info in dict.fromkeys(task["evaluation_criteria"].get("communicate_info") or []):
            var = TOLD_PREFIX + info
            atoms.append(Atom(var, lambda s, e, var=var: _status(bool(s.get(var))),
                              "online", (), (var,), "hard",
                              audit_source=f"communicate_info: {info!r} in an agent message",
                              irreversible=True, level=2))
            told.append(var)
    atoms.append(Atom(
        "commit",
        lambda s, e: _status(bool(s.get(STOPPED)) and all(s.get(v) for v in told)),
        "terminal_only", (*writes, *told), (STOPPED, *told), "hard",
        audit_source="the conversation ended by a stop, every string told",
        irreversible=True, level=0))
    if DB in basis:
        golden_vars = {DB_PREFIX + record for record in diff}

        def extra(state: State, evidence: Any = None) -> tuple[str, ...]:
            return tuple(sorted(k for k in state
                                if k.startswith(DB_PREFIX) and k not in golden_vars))

        atoms.append(Atom("no_extra_writes",
                          lambda s, e: Status.VIOL if extra(s) else Status.SAT, "online", (),
                          (), "penalty", audit_source="a record outside the golden diff changed",
                          binds=extra, level=0))
    return tuple(atoms)


def _mutations(domain: str, task: dict[str, Any], atoms: tuple[Atom, ...]) -> dict[str, Any]:
    golden = [a.state_vars[0] for a in atoms if a.atom_id.startswith("write:")]
    base = load_domain(domain).db

    def alter_target_field(s: State, e: Any):
        var = next((v for v in golden if v in s), None)
        if var is None:
            return s, e
        record = json.loads(s[var])
        field = next((k for k in sorted(record) if isinstance(record[k], (str, int, float))
                      and not isinstance(record[k], bool)), None)
        if field is None:
            return s, e
        value = record[field]
        record[field] = value + " (altered)" if isinstance(value, str) else value + 1
        return {**s, var: canonical_json(record)}, e

    def add_extra_write(s: State, e: Any):
        table = next(iter(base))
        key = next(k for k in base[table] if DB_PREFIX + f"{table}/{k}" not in golden)
        record = {**base[table][key], "extra": True}
        return {**s, DB_PREFIX + f"{table}/{key}": canonical_json(record)}, e

    def drop_communicated(s: State, e: Any):
        var = next((k for k in sorted(s) if k.startswith(TOLD_PREFIX) and s[k]), None)
        return (s, e) if var is None else ({**s, var: False}, e)

    def end_unstopped(s: State, e: Any):
        return {**s, STOPPED: False}, e

    return {"alter_target_field": alter_target_field, "add_extra_write": add_extra_write,
            "drop_communicated": drop_communicated, "end_unstopped": end_unstopped}


def build_verifier(task: Task, domain: str, tau_task: dict[str, Any]) -> Verifier:
    """The VICT verifier of one tau2 task."""
    atoms = build_atoms(domain, tau_task)
    ids = [a.atom_id[len("reveal:"):] for a in atoms if a.atom_id.startswith("reveal:")]
    writes = {a.atom_id for a in atoms if a.atom_id.startswith("write:")}
    write_tools = TOOLKITS[domain].WRITE_TOOLS

    def is_commit(action: str) -> bool:
        call = parse_action(action)
        return isinstance(call, ToolCall) and call.name in write_tools

    def commit_scope(action: str) -> tuple[str, ...]:
        if not is_commit(action):
            return ()
        named = {f"write:{table}/{value}"
                 for arg, table in RECORD_ARGUMENTS.items()
                 if isinstance(value := parse_action(action).arguments.get(arg), str)}
        return tuple(sorted(named & writes))

    def extract_evidence(text: str, state: State) -> dict[str, Any]:
        return {SEEN + i: True for i in ids if i in text}

    return Verifier(task_id=task.task_id, atoms=atoms,
                    aggregate=ConjunctiveAggregator.from_atoms(atoms),
                    original=lambda state: original_score(domain, tau_task, state),
                    is_commit=is_commit, commit_scope=commit_scope,
                    extract_evidence=extract_evidence,
                    mutations=_mutations(domain, tau_task, atoms), env=task.env)
