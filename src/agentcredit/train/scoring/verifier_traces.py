"""Trace collected rollouts through their tasks' verifiers for VICT (docs/vict.md §4.3).

The trainer calls ``VerifierTracer.trace`` between collection and credit, so
the credit functions receive plain ``RolloutTrace`` records and stay pure
functions of the batch. Verifiers and their dependency graphs are built once
per task and reused across updates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentcredit.envs.base import Environment
from agentcredit.rollout.records import Trajectory
from agentcredit.verifier.atoms import Verifier
from agentcredit.verifier.closure import DependencyGraph
from agentcredit.verifier.trace import RolloutTrace, trace_rollout


class VerifierTracer:
    """Builds (and caches) each task's verifier and traces trajectories through it.

    Args:
        make_env: a factory of environment instances; one instance builds verifiers.
    """

    def __init__(self, make_env: Callable[[], Environment]):
        self._make_env = make_env
        self._env: Environment | None = None
        self._verifiers: dict[str, tuple[Verifier, DependencyGraph]] = {}

    def verifier(self, trajectory: Trajectory) -> tuple[Verifier, DependencyGraph]:
        """The verifier and dependency graph of the trajectory's task."""
        task = trajectory.task
        if task.task_id not in self._verifiers:
            if self._env is None:
                self._env = self._make_env()
            verifier = self._env.verifier(task)
            self._verifiers[task.task_id] = (verifier, DependencyGraph.from_atoms(verifier.atoms))
        return self._verifiers[task.task_id]

    def trace(self, trajectories: Sequence[Trajectory]) -> tuple[RolloutTrace, ...]:
        """One trace per trajectory, in order."""
        return tuple(self.trace_one(t) for t in trajectories)

    def trace_one(self, trajectory: Trajectory) -> RolloutTrace:
        """Trace one trajectory: ``T+1`` observations and snapshots, ``T`` actions."""
        if trajectory.initial_snapshot is None:
            raise ValueError(f"trajectory of task {trajectory.task.task_id!r} has no initial "
                             "snapshot; collect with record_snapshots=True to trace it")
        verifier, graph = self.verifier(trajectory)
        steps = trajectory.steps
        return trace_rollout(
            verifier,
            observations=[s.observation for s in steps] + [trajectory.final_observation],
            snapshots=[trajectory.initial_snapshot] + [s.snapshot for s in steps],
            actions=[s.action for s in steps],
            valid=[s.valid for s in steps],
            graph=graph,
            admissible=self.admissible_sets(trajectory),
        )

    @staticmethod
    def admissible_sets(trajectory: Trajectory) -> list[tuple[str, ...]] | None:
        """The ``T+1`` admissible sets of a trajectory for its support edges, or ``None`` when the
        collector did not record them (docs/vict.md §4.3)."""
        sets = [s.admissible for s in trajectory.steps] + [trajectory.final_admissible]
        return None if any(a is None for a in sets) else sets
