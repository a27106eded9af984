"""The environment-independent VICT verifier interface (docs/vict.md §4.1).

A ``Verifier`` is instantiated per task. It exposes the task's checked facts as
``Atom`` s, an aggregator ``F`` over terminal atom statuses, the environment's
original success check ``V`` over a state, commit predicates with their scopes,
an evidence extractor over observations, and the mutations used for the
conformance check (docs/vict.md §4.2).

Only the verifier holds closures over the environment. What the credit
functions read after tracing is plain data: each atom's ``AtomSpec`` (its
timing, dependencies, role and weight, no predicate) and ``F`` as a frozen
dataclass of plain fields (``verifier/aggregators.py``, WebShop's in
``envs/webshop/verifier.py``), so a traced batch pickles without the
environment.

States are the environment's snapshots (``Φ``: ``variable -> value``);
evidence is the cumulative ``variable -> value`` mapping revealed by the
observations so far.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

State = Mapping[str, Any]
Evidence = Mapping[str, Any]

EVALUABLE_WHEN = ("online", "on_evidence", "on_commit", "terminal_only")
SCORE_ROLES = ("hard", "graded", "penalty", "prerequisite")
#: the VICT paper's three-level instrumentation (appendix C): 0 = a final- or goal-state
#: difference, 1 = an instrumented verifier branch or score term, 2 = a deterministic adapter
#: over observations or trajectory history.
LEVELS = (0, 1, 2)


class Status(enum.Enum):
    """An atom's verdict on a state (docs/vict.md §4.1)."""

    SAT = "sat"
    UNSAT = "unsat"
    UNK = "unk"
    VIOL = "viol"


@dataclass(frozen=True)
class AtomSpec:
    """What the credit functions read of an atom: everything but its predicates (docs/vict.md §4.1).

    Attributes:
        atom_id: stable id, unique within the verifier.
        evaluable_when: ``online`` | ``on_evidence`` | ``on_commit`` | ``terminal_only``.
        dependencies: ids of the parent atoms this one requires.
        score_role: ``hard`` | ``graded`` | ``penalty`` | ``prerequisite``.
        weight: ``w_j``, the atom's weight in the signed atom value δ (docs/vict.md §4.5).
        irreversible: the paper's irreversibility flag (``Atom.irreversible``).
        level: the instrumentation level 0 / 1 / 2 (``Atom.level``), ``None`` if undeclared.
    """

    atom_id: str
    evaluable_when: str
    dependencies: tuple[str, ...]
    score_role: str
    weight: float
    irreversible: bool = False
    level: int | None = None


@dataclass(frozen=True)
class Atom:
    """One checked fact of a task's verifier.

    Attributes:
        atom_id: stable id, unique within the verifier (``"transformation"``).
        predicate: ``(state, evidence) -> Status``.
        evaluable_when: ``online`` | ``on_evidence`` | ``on_commit`` | ``terminal_only``.
        dependencies: ids of the parent atoms this one requires.
        state_vars: the state / evidence variables the predicate reads (witness keys).
        score_role: ``hard`` | ``graded`` | ``penalty`` | ``prerequisite``.
        weight: ``w_j``, the atom's weight in the signed atom value δ (docs/vict.md §4.5).
        audit_source: where the check comes from, for people reading the ledger.
        value: graded atoms only: ``(state, evidence) -> float in [0, 1]``.
        binds: ``(terminal state, terminal evidence) -> the state_vars this rollout's
            status actually rests on`` (the object finally placed, the product bought), or
            ``None`` for all of ``state_vars``; only these keys make witness edges
            (docs/vict.md §4.3).
        irreversible: the VICT paper's irreversibility flag (Table 9's schema): once the atom
            is SAT or VIOL, no admissible action changes its status again. It is metadata
            for the audit and the ledger and changes no credit (docs/vict.md §4.1); the audit
            counts the rollouts that contradict it.
        level: how the atom is instrumented (``LEVELS``; docs/vict.md §4.1), reported as the
            audit's Level-0/1/2 mix; ``None`` when the verifier does not say.
    """

    atom_id: str
    predicate: Callable[[State, Evidence], Status]
    evaluable_when: str
    dependencies: tuple[str, ...]
    state_vars: tuple[str, ...]
    score_role: str
    weight: float = 1.0
    audit_source: str = ""
    value: Callable[[State, Evidence], float] | None = None
    binds: Callable[[State, Evidence], tuple[str, ...]] | None = None
    irreversible: bool = False
    level: int | None = None

    def __post_init__(self) -> None:
        if self.evaluable_when not in EVALUABLE_WHEN:
            raise ValueError(f"atom {self.atom_id!r}: evaluable_when={self.evaluable_when!r}; "
                             f"expected one of {EVALUABLE_WHEN}")
        if self.score_role not in SCORE_ROLES:
            raise ValueError(f"atom {self.atom_id!r}: score_role={self.score_role!r}; "
                             f"expected one of {SCORE_ROLES}")
        if (self.score_role == "graded") != (self.value is not None):
            raise ValueError(f"atom {self.atom_id!r}: graded atoms need a value function "
                             "and only graded atoms may have one")
        if self.level is not None and self.level not in LEVELS:
            raise ValueError(f"atom {self.atom_id!r}: level={self.level!r}; expected one of "
                             f"{LEVELS} or None")

    def witness_vars(self, state: State, evidence: Evidence) -> tuple[str, ...]:
        """The variables whose changes witness this atom in a rollout ending in
        ``(state, evidence)``: ``binds`` of it, else every state variable."""
        return self.state_vars if self.binds is None else self.binds(state, evidence)

    @cached_property
    def spec(self) -> AtomSpec:
        """The atom without its predicates (what a ``RolloutTrace`` keeps); one object per
        atom, so the traces of a task share it and a pickled batch stores it once."""
        return AtomSpec(self.atom_id, self.evaluable_when, self.dependencies, self.score_role,
                        self.weight, self.irreversible, self.level)


@dataclass(frozen=True)
class Verifier:
    """A task's verifier (docs/vict.md §4.1).

    Attributes:
        task_id: the task this verifier was built for.
        atoms: the atoms, in a fixed order (no credit depends on it, docs/vict.md §4.4).
        aggregate: ``F``: terminal atom statuses (``atom_id -> Status``) -> score. Give a
            frozen dataclass of plain fields (``aggregators.ConjunctiveAggregator``): traces
            carry it, and a lambda or closure keeps them from being pickled.
        original: ``V``: a state -> the environment's own score.
        is_commit: whether an action text commits.
        commit_scope: the atom ids a committing action finalises.
        extract_evidence: ``(observation text, state after) -> evidence variables revealed``.
        mutations: name -> ``(state, evidence) -> (state, evidence)`` edits of a terminal state.
        env: the environment that built it (``alfworld``, ``webshop``; ``custom`` when
            built by hand).
    """

    task_id: str
    atoms: tuple[Atom, ...]
    aggregate: Callable[[Mapping[str, Status]], float]
    original: Callable[[State], float]
    is_commit: Callable[[str], bool]
    commit_scope: Callable[[str], tuple[str, ...]]
    extract_evidence: Callable[[str, State], dict[str, Any]]
    mutations: Mapping[str, Callable[[State, Evidence], tuple[State, Evidence]]] = field(
        default_factory=dict)
    env: str = "custom"

    def __post_init__(self) -> None:
        ids = [a.atom_id for a in self.atoms]
        if len(set(ids)) != len(ids):
            raise ValueError(f"verifier {self.task_id!r} has duplicate atom ids: {ids}")
        unknown = {d for a in self.atoms for d in a.dependencies} - set(ids)
        if unknown:
            raise ValueError(f"verifier {self.task_id!r}: dependencies on unknown atoms "
                             f"{sorted(unknown)}")

    @property
    def verifier_id(self) -> str:
        """``<env>:<task_id>`` (``webshop:webshop-test-00003``): which verifier a trace came from;
        ``env.verifier(task)`` rebuilds it when someone needs its predicates."""
        return f"{self.env}:{self.task_id}"

    def atom(self, atom_id: str) -> Atom:
        """The atom with ``atom_id``."""
        for atom in self.atoms:
            if atom.atom_id == atom_id:
                return atom
        raise KeyError(f"verifier {self.task_id!r} has no atom {atom_id!r}; "
                       f"atoms: {[a.atom_id for a in self.atoms]}")

    def statuses(self, state: State, evidence: Evidence) -> dict[str, Status]:
        """``z̄``: every atom's status on ``(state, evidence)``."""
        return {a.atom_id: a.predicate(state, evidence) for a in self.atoms}

    def score(self, state: State, evidence: Evidence) -> float:
        """``F_x(z̄)`` on ``(state, evidence)``."""
        return self.aggregate(self.statuses(state, evidence))
