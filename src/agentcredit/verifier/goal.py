"""Level-0 atoms derived from a declared goal state (docs/vict.md §4.1, "Level-0 atoms from a
goal state").

The VICT paper's Level 0 is a final- or goal-state difference; writing those atoms by hand is
mechanical. A ``Goal`` declares, over the environment's snapshot variables (``Φ``):

- ``equal``: variables that must hold a value at the end (field equality, a record as the
  task wants it);
- ``exist``: variables that must be present (record existence, whatever its value);
- ``unchanged``: variable prefixes no other variable under which may differ from the first
  snapshot ``Φ_0`` (forbidden non-modification: a write the task does not ask for).

``goal_atoms(goal, initial)`` builds one atom per declared fact, each with its predicate, its
state variables (so the witness edges of docs/vict.md §4.3 come for free), the dependencies
the user adds (``depends``), and ``level=0``:

- ``equal:<var>`` (hard, online): SAT iff ``Φ[var] == value``, else UNSAT;
- ``exist:<var>`` (hard, online): SAT iff ``var`` is in ``Φ`` and not ``None``, else UNSAT;
- ``unchanged:<prefix>`` (penalty, online): VIOL iff a variable under ``prefix`` that the goal
  does not name differs from ``Φ_0`` (a variable absent from ``Φ_0`` counts as changed once it
  appears), else SAT; it binds the variables that changed.

``goal_verifier`` wraps them in a ``Verifier`` whose aggregator is their conjunction
(``ConjunctiveAggregator``). Levels 1 and 2 (a verifier's branches, observations) stay written
by hand and are added with ``extra_atoms``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentcredit.verifier.aggregators import ConjunctiveAggregator
from agentcredit.verifier.atoms import Atom, Evidence, State, Status, Verifier

#: a value absent from a snapshot (never equal to a real value, ``None`` included)
_ABSENT = object()


@dataclass(frozen=True)
class Goal:
    """A task's goal state, over snapshot variables.

    Attributes:
        equal: variable -> the value it must hold at the end.
        exist: variables that must be present at the end.
        unchanged: prefixes under which every variable the goal does not name must keep its
            value of the first snapshot.
        depends: atom id -> ids of the atoms it requires (``equal:<var>``, ``exist:<var>``, or
            hand-written ones added with ``extra_atoms``).
    """

    equal: Mapping[str, Any] = field(default_factory=dict)
    exist: Sequence[str] = ()
    unchanged: Sequence[str] = ()
    depends: Mapping[str, Sequence[str]] = field(default_factory=dict)


def goal_atoms(goal: Goal, initial: State) -> tuple[Atom, ...]:
    """The Level-0 atoms of ``goal`` (module docstring); ``initial`` is the first snapshot
    ``Φ_0``, against which ``unchanged`` compares."""
    named = {*goal.equal, *goal.exist}
    atoms: list[Atom] = []

    def deps(atom_id: str) -> tuple[str, ...]:
        return tuple(goal.depends.get(atom_id, ()))

    for var in sorted(goal.equal):
        atom_id = f"equal:{var}"
        atoms.append(Atom(atom_id, _equals(var, goal.equal[var]), "online", deps(atom_id),
                          (var,), "hard", audit_source=f"goal: {var} equals its goal value",
                          level=0))
    for var in sorted(set(goal.exist) - set(goal.equal)):
        atom_id = f"exist:{var}"
        atoms.append(Atom(atom_id, _exists(var), "online", deps(atom_id), (var,), "hard",
                          audit_source=f"goal: {var} exists", level=0))
    for prefix in goal.unchanged:
        changed = _changed(prefix, named, dict(initial))
        atom_id = f"unchanged:{prefix}"
        atoms.append(Atom(atom_id, lambda s, e, changed=changed: (
                              Status.VIOL if changed(s, e) else Status.SAT),
                          "online", deps(atom_id), (), "penalty", binds=changed,
                          audit_source=f"goal: nothing else under {prefix!r} changes",
                          level=0))
    known = {a.atom_id for a in atoms}
    unknown = sorted(set(goal.depends) - known)
    if unknown:
        raise ValueError(f"Goal.depends names atoms the goal does not make: {unknown}; its "
                         f"atoms are {sorted(known)}")
    return tuple(atoms)


def goal_verifier(task_id: str, goal: Goal, initial: State, *,
                  original: Callable[[State], float] | None = None,
                  extra_atoms: Sequence[Atom] = (),
                  is_commit: Callable[[str], bool] = lambda action: False,
                  commit_scope: Callable[[str], tuple[str, ...]] = lambda action: (),
                  extract_evidence: Callable[[str, State], dict[str, Any]] = (
                      lambda text, state: {}),
                  env: str = "custom") -> Verifier:
    """A ``Verifier`` over ``goal_atoms(goal, initial)`` and ``extra_atoms``, with ``F`` their
    conjunction; ``original`` (``V``) defaults to the same conjunction on the state (no
    evidence), so the verifier conforms by construction when the atoms read only the state."""
    atoms = (*goal_atoms(goal, initial), *extra_atoms)
    aggregate = ConjunctiveAggregator.from_atoms(atoms)

    def conjunction(state: State) -> float:
        return aggregate({a.atom_id: a.predicate(state, {}) for a in atoms})

    return Verifier(task_id=task_id, atoms=atoms, aggregate=aggregate,
                    original=original or conjunction, is_commit=is_commit,
                    commit_scope=commit_scope, extract_evidence=extract_evidence, env=env)


def _equals(var: str, value: Any) -> Callable[[State, Evidence], Status]:
    return lambda s, e: Status.SAT if s.get(var, _ABSENT) == value else Status.UNSAT


def _exists(var: str) -> Callable[[State, Evidence], Status]:
    return lambda s, e: Status.SAT if s.get(var) is not None else Status.UNSAT


def _changed(prefix: str, named: set[str], initial: dict[str, Any]
             ) -> Callable[[State, Evidence], tuple[str, ...]]:
    """``(state, evidence) -> the variables under prefix, not named by the goal, whose value
    differs from the initial snapshot`` (removed ones included)."""
    def changed(state: State, evidence: Evidence = None) -> tuple[str, ...]:
        keys = {k for k in (*state, *initial) if k.startswith(prefix) and k not in named}
        return tuple(sorted(k for k in keys
                            if state.get(k, _ABSENT) != initial.get(k, _ABSENT)))

    return changed
