"""Trace one finished rollout through its task's verifier (docs/vict.md §4.1-4.3).

``trace_rollout`` replays what a rollout recorded — the observations (the
initial one included), the state snapshots ``Φ`` (the initial one included)
and the actions — and returns a ``RolloutTrace``: a plain, torch-free record
that the VICT credit functions read. It holds no live verifier (whose
predicates close over the environment; WebShop's over its whole catalogue),
only data that pickles in proportion to the rollout:

- which verifier it came from (``verifier_id``), each atom's ``AtomSpec``, the
  dependency graph and ``F`` as a plain aggregator object;
- the atom statuses ``z_t`` after every step, ``t = 0..T`` (``t = 0`` = after reset);
- the cumulative evidence timeline ``E_0..E_T`` and what each observation revealed;
- the raw signed atom values ``δ_j`` read at the end (docs/vict.md §4.5);
- conformance: ``F`` and ``V`` on the terminal state and on its mutants (docs/vict.md §4.2);
- the proof edges ``(t, j, r)`` with their proof-record dependency check (docs/vict.md §4.3);
  write and reveal edges watch ``Atom.witness_vars`` of the terminal state and evidence,
  the variables that rollout's status rests on (an atom's ``binds``, else its ``state_vars``);
  a bound key may carry a guard (``guarded``): the change counts only while another
  variable holds a given value after the step (WebShop: while the bought product is open);
  an atom that ends without SAT keeps only the writes and commits after it was last SAT
  (the steps that left it unsatisfied, not a good move a later one undid); ``support`` edges come
  from the admissible sets before and after each step (the last step that made a later
  write or commit of the atom admissible, after the atom's previous witness), and an atom's
  reveal and support edges (its evidence path) share a weight of 1.0;
- which atoms each step "mentions" (for the ``temporal_nearest`` control, docs/vict.md §4.8).

Indexing: action ``a_t`` (``t = 0..T-1``) is taken in state ``Φ_t`` and leads
to ``Φ_{t+1}`` and observation ``o_{t+1}``; ``o_0`` / ``Φ_0`` are the reset.

Timing of statuses (``Atom.evaluable_when``): ``online`` and ``on_evidence``
atoms are evaluated at every ``t``; an ``on_commit`` atom is ``UNK`` until a
valid commit whose scope names it has happened; a ``terminal_only`` atom is
``UNK`` before ``T``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentcredit.verifier.atoms import AtomSpec, Evidence, State, Status, Verifier
from agentcredit.verifier.closure import DependencyGraph
from agentcredit.verifier.reconstruction import MutationOutcome, evidence_timeline

_MISSING = object()


@dataclass(frozen=True)
class ProofEdge:
    """A witness ``(t, j, r)`` linking step ``t`` to atom ``j`` by relation ``r``
    (docs/vict.md §4.3).

    Attributes:
        step: ``t``, the action's index in the rollout.
        atom_id: ``j``.
        relation: ``write`` | ``commit`` | ``violation`` | ``reveal`` | ``support``.
        weight: the witness weight ``ω``: 1 for write / commit / violation; the
            valid reveal and support edges of one atom (its evidence path) share 1.0
            equally (an invalid one has weight 0; invalid edges never carry credit).
        source: the evidence behind the edge, for the ledger
            (``state:ishot(egg 1)``, ``action:move egg 1 to countertop 1``,
            ``status:premature_placement=viol``, ``observation:seen:egg 1``,
            ``enables:move egg 1 to countertop 1``).
        valid: the proof record satisfies the dependencies: every parent of ``j``
            is SAT at ``t+1`` ([choice] a parent that is not evaluable yet at
            ``t+1`` — terminal-only, or on-commit before its commit — must be SAT
            at the end instead).
        unmet_parents: the parents that made the record invalid.
    """

    step: int
    atom_id: str
    relation: str
    weight: float
    source: str
    valid: bool
    unmet_parents: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class RolloutTrace:
    """A rollout seen through its task's verifier; see the module docstring.

    Attributes:
        task_id: the verifier's task (rollouts of one group share it).
        verifier_id: ``Verifier.verifier_id``, ``<env>:<task_id>``: the verifier
            that produced the trace (the trace keeps none of its predicates).
        atoms: ``J`` atom specs in the verifier's order: timing, dependencies, role, weight.
        aggregate: ``F``, the verifier's own aggregator object, plain data for the
            environments' verifiers (the credit function evaluates it on
            counterfactual statuses, docs/vict.md §4.4).
        graph: the verifier's dependency graph (closures, excluded atoms).
        actions: ``T`` action texts.
        valid: ``T`` flags, the environment accepted the action.
        statuses: ``T+1`` rows of ``J`` statuses, ``statuses[t][j]`` = ``z_{t,j}``.
        evidence: ``T+1`` cumulative evidence mappings ``E_t``.
        revealed: ``T+1`` sets of evidence keys observation ``o_t`` added or changed.
        mentions: ``T`` sets of atom ids whose state variables step ``t`` changed
            or whose variables' entities its action text names.
        delta: ``J`` raw signed atom values ``δ_j`` at the end: ``+w`` SAT (graded:
            ``+w·value``), ``0`` UNSAT / UNK, ``−w`` VIOL (docs/vict.md §4.5).
        f_score: ``F_x(z̄_T)``.
        v_score: ``V_x(Φ_T)``.
        mutations: ``F`` and ``V`` on every mutant of the terminal state.
        edges: every proof edge, valid or not, ordered by step then atom order.
    """

    task_id: str
    verifier_id: str
    atoms: tuple[AtomSpec, ...] = field(repr=False)
    aggregate: Callable[[Mapping[str, Status]], float] = field(repr=False)
    graph: DependencyGraph = field(repr=False)
    actions: tuple[str, ...]
    valid: tuple[bool, ...]
    statuses: tuple[tuple[Status, ...], ...]
    evidence: tuple[Mapping[str, Any], ...] = field(repr=False)
    revealed: tuple[frozenset[str], ...] = field(repr=False)
    mentions: tuple[frozenset[str], ...] = field(repr=False)
    delta: tuple[float, ...]
    f_score: float
    v_score: float
    mutations: tuple[MutationOutcome, ...]
    edges: tuple[ProofEdge, ...]

    @property
    def num_steps(self) -> int:
        """``T``, the number of actions."""
        return len(self.actions)

    @property
    def atom_ids(self) -> tuple[str, ...]:
        """The atoms, in the verifier's order."""
        return self.graph.atom_ids

    def atom(self, atom_id: str) -> AtomSpec:
        """The spec of the atom ``atom_id``."""
        return self.atoms[self.graph.index(atom_id)]

    @property
    def terminal(self) -> dict[str, Status]:
        """``z̄``: the statuses at the end, ``atom_id -> Status``."""
        return dict(zip(self.atom_ids, self.statuses[-1], strict=True))

    @property
    def reconstruction_error(self) -> float:
        """``|F_x(z̄(τ)) − V_x(τ)|`` on the rollout itself."""
        return abs(self.f_score - self.v_score)

    @property
    def conformance_error(self) -> float:
        """``max |F − V|`` over the rollout and its mutants (docs/vict.md §4.2)."""
        return max([self.reconstruction_error]
                   + [abs(m.f_score - m.v_score) for m in self.mutations])


def trace_rollout(verifier: Verifier, observations: Sequence[str], snapshots: Sequence[State],
                  actions: Sequence[str | None], *, valid: Sequence[bool] | None = None,
                  graph: DependencyGraph | None = None,
                  admissible: Sequence[Collection[str]] | None = None) -> RolloutTrace:
    """Trace a finished rollout post hoc (see the module docstring).

    Args:
        verifier: the task's verifier.
        observations: ``T+1`` texts: the reset observation, then one per step.
        snapshots: ``T+1`` state snapshots ``Φ_0..Φ_T`` (``Φ_0`` after reset).
        actions: ``T`` action texts (``None`` for an unparsable response).
        valid: ``T`` flags, whether the environment accepted each action; an
            invalid action never commits. ``None`` means all valid.
        graph: the verifier's dependency graph, to share one across a group.
        admissible: ``T+1`` sets of the actions the environment admitted in ``Φ_0..Φ_T``,
            from which the ``support`` edges are read; ``None`` (an environment without
            admissible sets) makes no support edge.
    """
    num_steps = len(actions)
    valid = _checked_validity(num_steps, observations, snapshots, valid, admissible)
    graph = graph or DependencyGraph.from_atoms(verifier.atoms)
    texts = tuple(a if isinstance(a, str) else "" for a in actions)
    atoms = verifier.atoms

    # EVIDENCE
    timeline = evidence_timeline(verifier, observations, snapshots)
    revealed = _revealed(timeline)

    # COMMITS AND STATUSES
    commits = [verifier.is_commit(a) and ok for a, ok in zip(texts, valid, strict=True)]
    scopes = [frozenset(verifier.commit_scope(a)) if c else frozenset()
              for a, c in zip(texts, commits, strict=True)]
    statuses, evaluable, committed = _status_timeline(verifier, snapshots, timeline, scopes)

    # TERMINAL VALUES AND CONFORMANCE
    final_state, final_evidence = snapshots[-1], timeline[-1]
    terminal = dict(zip(graph.atom_ids, statuses[-1], strict=True))
    delta = tuple(_signed_value(a, z, final_state, final_evidence)
                  for a, z in zip(atoms, statuses[-1], strict=True))
    mutations = _mutation_outcomes(verifier, graph, final_state, final_evidence, committed)

    # PROOF EDGES
    bound = [a.witness_vars(final_state, final_evidence) for a in atoms]
    raw, mentions = _raw_edges(atoms, bound, snapshots, timeline, revealed, texts, scopes,
                               statuses)
    settled = _settled_writes(raw, statuses)
    if admissible is not None:
        settled = _with_support(settled, raw, texts, [frozenset(a) for a in admissible])
    raw = settled
    edges = _proof_edges(raw, atoms, graph, statuses, evaluable)

    return RolloutTrace(
        task_id=verifier.task_id, verifier_id=verifier.verifier_id,
        atoms=tuple(a.spec for a in atoms), aggregate=verifier.aggregate, graph=graph,
        actions=texts, valid=valid,
        statuses=tuple(statuses), evidence=tuple(timeline), revealed=tuple(revealed),
        mentions=tuple(mentions), delta=delta, f_score=verifier.aggregate(terminal),
        v_score=verifier.original(final_state), mutations=tuple(mutations), edges=edges)


def _checked_validity(num_steps: int, observations: Sequence[str], snapshots: Sequence[State],
                      valid: Sequence[bool] | None,
                      admissible: Sequence[Collection[str]] | None) -> tuple[bool, ...]:
    """The ``T`` validity flags (all True for ``None``), after checking that there are
    ``T+1`` observations, snapshots and (when given) admissible sets for ``T`` actions."""
    if len(observations) != num_steps + 1 or len(snapshots) != num_steps + 1:
        raise ValueError(
            f"trace_rollout got {num_steps} actions, {len(observations)} observations and "
            f"{len(snapshots)} snapshots; pass T actions and T+1 observations and snapshots "
            "(the reset observation and snapshot first)")
    valid = tuple(bool(v) for v in valid) if valid is not None else (True,) * num_steps
    if len(valid) != num_steps:
        raise ValueError(f"trace_rollout got {len(valid)} validity flags for {num_steps} actions")
    if admissible is not None and len(admissible) != num_steps + 1:
        raise ValueError(f"trace_rollout got {len(admissible)} admissible sets for {num_steps} "
                         "actions; pass T+1 (the reset's first) or None")
    return valid


def _revealed(timeline: Sequence[Evidence]) -> list[frozenset[str]]:
    """``T+1`` sets: the evidence keys observation ``o_t`` added or changed in ``E_t``
    (``o_0``: every key of ``E_0``)."""
    revealed = [frozenset(timeline[0])]
    for before, after in itertools.pairwise(timeline):
        revealed.append(frozenset(k for k, v in after.items() if before.get(k, _MISSING) != v))
    return revealed


def _status_timeline(verifier: Verifier, snapshots: Sequence[State],
                     timeline: Sequence[Evidence], scopes: Sequence[frozenset[str]]
                     ) -> tuple[list[tuple[Status, ...]], list[tuple[bool, ...]], set[str]]:
    """``z_t`` for ``t = 0..T`` (``T+1`` rows of ``J`` statuses), which atoms were evaluable
    at each ``t``, and the atoms committed by the end; step ``t``'s commit ``scopes[t]``
    counts from ``t+1`` on."""
    num_steps = len(scopes)
    committed: set[str] = set()
    statuses, evaluable = [], []
    for t in range(num_steps + 1):
        if t > 0:
            committed |= scopes[t - 1]
        row, ok = _statuses(verifier, snapshots[t], timeline[t], committed, terminal=t == num_steps)
        statuses.append(row)
        evaluable.append(ok)
    return statuses, evaluable, committed


def _mutation_outcomes(verifier: Verifier, graph: DependencyGraph, final_state: State,
                       final_evidence: Evidence, committed: set[str]) -> list[MutationOutcome]:
    """``F`` and ``V`` on every mutant of the terminal state (docs/vict.md §4.2)."""
    mutations = []
    for name, mutate in verifier.mutations.items():
        state, evidence = mutate(final_state, final_evidence)
        row, _ = _statuses(verifier, state, evidence, committed, terminal=True)
        mutations.append(MutationOutcome(
            name, verifier.aggregate(dict(zip(graph.atom_ids, row, strict=True))),
            verifier.original(state)))
    return mutations


def _raw_edges(atoms, bound: Sequence[Collection[str]], snapshots: Sequence[State],
               timeline: Sequence[Evidence], revealed: Sequence[frozenset[str]],
               texts: Sequence[str], scopes: Sequence[frozenset[str]],
               statuses: Sequence[tuple[Status, ...]]
               ) -> tuple[list[tuple[int, int, str, str]], list[frozenset[str]]]:
    """The write, commit, violation and reveal edges ``(t, j, relation, source)`` of every step
    (docs/vict.md §4.3), in step then atom order, and the ``T`` sets of atoms each step
    mentions. ``bound[j]`` are atom ``j``'s witness keys (guards allowed)."""
    var_atoms: dict[str, list[tuple[int, tuple[str, str] | None]]] = {}
    for j, keys in enumerate(bound):
        for key in keys:
            var, guard = split_guard(key)
            var_atoms.setdefault(var, []).append((j, guard))
    terms = [_entity_pattern([split_guard(k)[0] for k in keys]) for keys in bound]
    raw: list[tuple[int, int, str, str]] = []  # (t, j, relation, source)
    mentions = []
    for t in range(len(texts)):
        changed = _changed_vars(snapshots[t], snapshots[t + 1])
        after = {**snapshots[t + 1], **timeline[t + 1]}  # what a guard is checked against
        written: dict[int, list[str]] = {}
        for v in changed:
            for j, guard in var_atoms.get(v, ()):
                if _guard_holds(guard, after):
                    written.setdefault(j, []).append(v)
        shown: dict[int, list[str]] = {}
        for v in revealed[t + 1]:
            for j, guard in var_atoms.get(v, ()):
                if _guard_holds(guard, after):
                    shown.setdefault(j, []).append(v)
        named = {j for j, pat in enumerate(terms) if pat is not None and pat.search(texts[t])}
        mentions.append(frozenset(atoms[j].atom_id for j in set(written) | named))
        for j, atom in enumerate(atoms):
            if j in written:
                raw.append((t, j, "write", "state:" + ", ".join(sorted(written[j])[:3])))
            if atom.atom_id in scopes[t]:
                raw.append((t, j, "commit", f"action:{texts[t]}"))
            if statuses[t + 1][j] is Status.VIOL and statuses[t][j] is not Status.VIOL:
                raw.append((t, j, "violation", f"status:{atom.atom_id}=viol"))
            if j in shown:
                raw.append((t, j, "reveal", "observation:" + ", ".join(sorted(shown[j])[:3])))
    return raw, mentions

def _statuses(verifier: Verifier, state: State, evidence: Evidence, committed: set[str], *,
              terminal: bool) -> tuple[tuple[Status, ...], tuple[bool, ...]]:
    """Every atom's status on ``(state, evidence)`` with the timing rules, and which were
    evaluable."""
    row, ok = [], []
    for atom in verifier.atoms:
        can = (terminal if atom.evaluable_when == "terminal_only"
               else atom.atom_id in committed if atom.evaluable_when == "on_commit" else True)
        row.append(atom.predicate(state, evidence) if can else Status.UNK)
        ok.append(can)
    return tuple(row), tuple(ok)


def _signed_value(atom, status: Status, state: State, evidence: Evidence) -> float:
    """``δ_j`` of docs/vict.md §4.5."""
    if status is Status.SAT:
        value = float(atom.value(state, evidence)) if atom.value is not None else 1.0
        return atom.weight * value
    return -atom.weight if status is Status.VIOL else 0.0


#: separates a witness key's variable from its guard: ``"selected:size @ product:asin=B01"``
#: (not ``|``, which ALFWorld's object ids contain).
GUARD = " @ "


def guarded(var: str, guard_var: str, value: Any) -> str:
    """The witness key "``var`` changed (or was revealed) while ``guard_var`` equals ``value``
    after the step": how ``Atom.binds`` ties a generic variable (the selected size, the open
    page's title) to one entity (the product bought), docs/vict.md §4.3."""
    return f"{var}{GUARD}{guard_var}={value}"


def split_guard(key: str) -> tuple[str, tuple[str, str] | None]:
    """``(var, (guard_var, value))`` of a witness key; ``(key, None)`` without a guard."""
    var, sep, guard = key.partition(GUARD)
    if not sep:
        return key, None
    guard_var, _, value = guard.partition("=")
    return var, (guard_var, value)


def _guard_holds(guard: tuple[str, str] | None, after: Mapping[str, Any]) -> bool:
    return guard is None or (guard[0] in after and str(after[guard[0]]) == guard[1])


def _changed_vars(before: State, after: State) -> list[str]:
    """Variables whose value differs between two snapshots (a missing key is its own value)."""
    if before is after:
        return []
    return [k for k in before.keys() | after.keys()
            if before.get(k, _MISSING) != after.get(k, _MISSING)]


def _entity_pattern(state_vars: Sequence[str]) -> re.Pattern | None:
    """A regex matching, as whole words, the entities an atom's variables name.

    ``holds(agent1, egg 1)`` names ``agent1`` and ``egg 1``; ``seen:egg 1`` names
    ``egg 1``; a bare variable ``v3`` names itself.
    """
    found = set()
    for var in state_vars:
        pieces = [p.strip() for p in re.split(r"[(),:]", var)]
        if len(pieces) > 1:
            pieces = pieces[1:]  # drop the predicate / namespace
        found.update(p for p in pieces if len(p) >= 2)
    if not found:
        return None
    alternatives = "|".join(re.escape(p) for p in sorted(found, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)")


def _settled_writes(raw: list[tuple[int, int, str, str]],
                   statuses: list[tuple[Status, ...]]) -> list[tuple[int, int, str, str]]:
    """``raw`` without the writes and commits of an atom that ends without SAT made before it
    was last SAT (docs/vict.md §4.3): the atom is blamed on the steps that left it
    unsatisfied, not on a good move a later one undid (a placement taken back)."""
    final = statuses[-1]
    last_sat = {j: max(u for u, row in enumerate(statuses) if row[j] is Status.SAT)
                for j, z in enumerate(final)
                if z in (Status.UNSAT, Status.UNK) and any(row[j] is Status.SAT
                                                          for row in statuses)}
    return [e for e in raw if not (e[2] in ("write", "commit") and e[1] in last_sat
                                   and e[0] < last_sat[e[1]])]


#: the order of an edge's relation among the edges of one (step, atom)
_RELATION_ORDER = {"write": 0, "commit": 1, "violation": 2, "reveal": 3, "support": 4}


def _with_support(edges: list[tuple[int, int, str, str]], raw: list[tuple[int, int, str, str]],
                  texts: Sequence[str],
                  admissible: Sequence[frozenset[str]]) -> list[tuple[int, int, str, str]]:
    """``edges`` with the ``support`` edges of docs/vict.md §4.3, ordered by step, atom, relation.

    For each ``write`` or ``commit`` edge ``(t', j)`` of ``edges`` whose action ``a_{t'}`` was not
    admissible from the start, the last step ``t < t'`` with ``a_{t'} ∉ A_t`` and
    ``a_{t'} ∈ A_{t+1}`` (it made the action possible), if ``t`` comes after every earlier
    witness of ``j`` in ``raw`` (the edges before ``_settled_writes``: a move a later take-back
    undid still bounds the take-back's path); ``admissible[t]`` = ``A_t``, the set of the state
    step ``t`` was taken in.
    """
    witnessed: dict[int, list[int]] = {}
    for t, j, _, _ in raw:
        witnessed.setdefault(j, []).append(t)
    support: dict[tuple[int, int], str] = {}
    for later, j, relation, _ in edges:
        if relation not in ("write", "commit"):
            continue
        action = texts[later]
        floor = max((u for u in witnessed[j] if u < later), default=-1)
        for t in range(later - 1, floor, -1):
            if action not in admissible[t] and action in admissible[t + 1]:
                support.setdefault((t, j), f"enables:{action}")
                break
    out = edges + [(t, j, "support", source) for (t, j), source in support.items()]
    return sorted(out, key=lambda e: (e[0], e[1], _RELATION_ORDER[e[2]]))


def _proof_edges(raw: list[tuple[int, int, str, str]], atoms, graph: DependencyGraph,
                 statuses: list[tuple[Status, ...]],
                 evaluable: list[tuple[bool, ...]]) -> tuple[ProofEdge, ...]:
    """Attach the dependency check and the witness weights to the raw edges."""
    index = {a: j for j, a in enumerate(graph.atom_ids)}
    final = statuses[-1]
    checked: dict[tuple[int, int], tuple[str, ...]] = {}
    for t, j, _, _ in raw:
        if (t, j) in checked:
            continue
        unmet = []
        for parent in atoms[j].dependencies:
            p = index[parent]
            status = statuses[t + 1][p] if evaluable[t + 1][p] else final[p]
            if status is not Status.SAT:
                unmet.append(parent)
        checked[t, j] = tuple(unmet)
    evidence_path: dict[int, int] = {}  # valid reveal and support edges per atom
    for t, j, relation, _ in raw:
        if relation in ("reveal", "support") and not checked[t, j]:
            evidence_path[j] = evidence_path.get(j, 0) + 1
    edges = []
    for t, j, relation, source in raw:
        unmet = checked[t, j]
        if relation in ("reveal", "support"):
            weight = 1.0 / evidence_path[j] if not unmet else 0.0
        else:
            weight = 1.0
        edges.append(ProofEdge(t, graph.atom_ids[j], relation, weight, source, not unmet, unmet))
    return tuple(edges)
