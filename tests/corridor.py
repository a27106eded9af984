"""The corridor's verifier and solver, shared by the test suite's ``FakeEnv`` (``conftest.py``)
and the synthetic runs of ``benchmarks/report_size.py``."""

from __future__ import annotations

from agentcredit.envs.base import Task
from agentcredit.verifier.aggregators import ConjunctiveAggregator
from agentcredit.verifier.atoms import Atom, Status, Verifier


def corridor_verifier(task: Task) -> Verifier:
    """Atoms: the apple was seen, the agent stands at it, the apple is taken (F = taken); the
    apple lies in ``task.payload["apple"]``."""
    apple = task.payload["apple"]

    def sat(ok: bool) -> Status:
        return Status.SAT if ok else Status.UNSAT

    atoms = (
        Atom("apple_seen", lambda s, e: sat("seen:apple" in e), "on_evidence", (),
             ("seen:apple",), "prerequisite"),
        Atom("at_apple", lambda s, e: sat(s.get("room") == apple), "online",
             ("apple_seen",), ("room",), "prerequisite"),
        Atom("apple_taken", lambda s, e: sat(bool(s.get("won"))), "online", ("at_apple",),
             ("won",), "hard"),
    )
    return Verifier(
        task_id=task.task_id, atoms=atoms,
        # F = 1 iff apple_taken (the one hard atom) is SAT; a dataclass, so traces pickle
        aggregate=ConjunctiveAggregator.from_atoms(atoms),
        original=lambda s: float(bool(s.get("won"))),
        is_commit=lambda a: a.strip() == "take apple",
        commit_scope=lambda a: ("apple_taken",) if a.strip() == "take apple" else (),
        extract_evidence=lambda text, s: {"seen:apple": True} if "an apple" in text else {},
    )


def corridor_distance(env, task: Task, prefix, cap: int, rng, observations) -> int:
    """The corridor's solver truth ``d(s)``
    (``train.evaluation.credit_check.truths.DistanceFn``): after replaying ``prefix``, walk
    straight to the apple and take it."""
    from agentcredit.envs.base import ReplayMismatch

    env.reset(task)
    for t, action in enumerate(prefix):
        obs, _, _, _ = env.step(action)
        if obs.text != observations[t]:
            raise ReplayMismatch(task.task_id, t, observations[t], obs.text)
    return 0 if env.won else min(abs(env.room - task.payload["apple"]) + 1, cap)
