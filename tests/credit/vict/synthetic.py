"""Synthetic verifiers and random rollouts for the VICT tests (properties, correction, ledger).

A synthetic task has ``J`` atoms ``a0..a{J-1}`` over boolean state variables
``v0..`` with random conjunctive dependencies on earlier atoms (a DAG), mixed
roles (hard, prerequisite, penalty, graded) and timings (online, on_evidence,
on_commit, terminal_only). ``F`` = every hard atom SAT and no penalty VIOL;
``V`` reads the same facts straight from the state, so the task conforms
(``liar=True`` makes ``V`` disagree, for non-conforming tests). A random
rollout flips variables, reveals evidence tokens ``x{j}`` in its observations
and sometimes commits (``commit …`` actions finalise the hard atoms).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from agentcredit.verifier.aggregators import ConjunctiveAggregator
from agentcredit.verifier.atoms import Atom, State, Status, Verifier
from agentcredit.verifier.closure import DependencyGraph
from agentcredit.verifier.trace import RolloutTrace, trace_rollout


def _flag(var: str):
    return lambda s, e: Status.SAT if s.get(var) else Status.UNSAT


def _seen(var: str):
    return lambda s, e: Status.SAT if e.get(var) else Status.UNSAT


def _penalty(var: str):
    return lambda s, e: Status.VIOL if s.get(var) else Status.UNSAT


def _graded(var: str):
    return lambda s, e: float(s.get(var, 0.0))


def synthetic_verifier(task_id: str, num_atoms: int, rng: random.Random, *,
                       liar: bool = False) -> Verifier:
    """A random verifier with ``num_atoms`` atoms (at least one hard atom)."""
    atoms, hard_vars, penalty_vars = [], [], []
    for j in range(num_atoms):
        deps = tuple(f"a{k}" for k in range(j) if rng.random() < 0.3)
        role = "hard" if j == num_atoms - 1 else rng.choice(
            ["hard", "hard", "prerequisite", "prerequisite", "penalty", "graded"])
        var = f"v{j}"
        if role == "hard":
            when = rng.choice(["online", "online", "online", "terminal_only"])
            atoms.append(Atom(f"a{j}", _flag(var), when, deps, (var,), "hard",
                              audit_source="synthetic hard fact"))
            hard_vars.append(var)
        elif role == "penalty":
            atoms.append(Atom(f"a{j}", _penalty(var), "online", deps, (var,), "penalty",
                              audit_source="synthetic violation"))
            penalty_vars.append(var)
        elif role == "graded":
            atoms.append(Atom(f"a{j}", _flag(var), "online", deps, (var,), "graded",
                              weight=0.5, value=_graded(f"g{j}"),
                              audit_source="synthetic graded fact"))
        elif rng.random() < 0.5:
            key = f"seen:x{j}"
            atoms.append(Atom(f"a{j}", _seen(key), "on_evidence", deps, (key,), "prerequisite",
                              audit_source="synthetic evidence"))
        else:
            when = rng.choice(["online", "on_commit"])
            atoms.append(Atom(f"a{j}", _flag(var), when, deps, (var,), "prerequisite",
                              audit_source="synthetic prerequisite"))
    hard_ids = tuple(a.atom_id for a in atoms if a.score_role == "hard")
    commit_scope = hard_ids + tuple(a.atom_id for a in atoms if a.evaluable_when == "on_commit")

    def original(state: State) -> float:
        ok = all(state.get(v) for v in hard_vars) and not any(state.get(v) for v in penalty_vars)
        return float(ok) if not liar else 1.0 - float(ok)

    def extract(text: str, state: State) -> dict[str, Any]:
        return {f"seen:{w}": True for w in text.split() if w.startswith("x")}

    def break_first_hard(s: State, e: Any):
        return {**s, hard_vars[0]: False}, e

    return Verifier(
        task_id=task_id, atoms=tuple(atoms), aggregate=ConjunctiveAggregator.from_atoms(atoms),
        original=original,
        is_commit=lambda a: a.startswith("commit"),
        commit_scope=lambda a: commit_scope if a.startswith("commit") else (),
        extract_evidence=extract, mutations={"break_first_hard": break_first_hard},
        env="synthetic")


@dataclass(frozen=True)
class SyntheticRollout:
    """What a rollout recorded: ``T+1`` observations and snapshots, ``T`` actions."""

    observations: tuple[str, ...]
    snapshots: tuple[dict[str, Any], ...]
    actions: tuple[str, ...]


def synthetic_rollout(verifier: Verifier, num_steps: int, rng: random.Random, *,
                      activity: float = 0.5) -> SyntheticRollout:
    """A random rollout of ``num_steps`` steps; ``activity`` = chance a step changes the state."""
    num_atoms = len(verifier.atoms)
    roles = [a.score_role for a in verifier.atoms]
    state: dict[str, Any] = {}
    observations, snapshots, actions = ["start x0" if rng.random() < 0.3 else "start"], [{}], []
    for t in range(num_steps):
        words = []
        if rng.random() < activity:
            j = rng.randrange(num_atoms)
            state = {**state, f"v{j}": rng.random() < (0.3 if roles[j] == "penalty" else 0.75)}
            if rng.random() < 0.5:
                state[f"g{j}"] = rng.choice([0.0, 0.5, 1.0])
            words.append(f"set v{j}")
        if rng.random() < 0.3:
            words.append(f"x{rng.randrange(num_atoms)}")
        action = "commit now" if rng.random() < 0.1 else f"act {t} " + " ".join(words)
        actions.append(action)
        observations.append("saw " + " ".join(w for w in words if w.startswith("x")))
        snapshots.append(dict(state))
    return SyntheticRollout(tuple(observations), tuple(snapshots), tuple(actions))


def synthetic_group(task_id: str, num_rollouts: int, num_atoms: int, num_steps: int,
                    rng: random.Random, *, liar: bool = False, activity: float = 0.5,
                    exact_length: bool = False) -> list[RolloutTrace]:
    """``num_rollouts`` traced random rollouts of one synthetic task: half run ``num_steps``
    steps, half a random length in ``1..num_steps`` (all ``num_steps`` with ``exact_length``)."""
    verifier = synthetic_verifier(task_id, num_atoms, rng, liar=liar)
    graph = DependencyGraph.from_atoms(verifier.atoms)
    traces = []
    for _ in range(num_rollouts):
        full = exact_length or rng.random() < 0.5
        length = num_steps if full else rng.randint(1, num_steps)
        r = synthetic_rollout(verifier, length, rng, activity=activity)
        traces.append(trace_rollout(verifier, r.observations, r.snapshots, r.actions, graph=graph))
    return traces
