"""The environment protocol every agentcredit environment speaks (docs/design.md, "envs/").

Environments never see tensors and never raise on a bad action: an action that
cannot be parsed or is not admissible leaves the state unchanged, is answered
with an observation that says so, and comes back with ``StepInfo.valid = False``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from agentcredit.verifier.atoms import Verifier


@dataclass(frozen=True)
class Task:
    """One task: what an environment needs to reset, and what a report groups by.

    Attributes:
        task_id: stable identifier, unique within an environment and split.
        env: registry name of the environment (``"alfworld"``).
        split: ``"train"``, ``"valid_seen"`` or ``"valid_unseen"``.
        instruction: the goal sentence shown to the agent.
        task_type: the task family used for per-type metrics and skill lookup.
        payload: whatever else the environment needs to reset (for ALFWorld the
            path of the ``game.tw-pddl`` file); plain JSON-serialisable values.
    """

    task_id: str
    env: str
    split: str
    instruction: str
    task_type: str
    payload: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Observation:
    """What the agent sees after ``reset`` or ``step``.

    Attributes:
        text: the environment's feedback text.
        admissible_actions: the actions valid in the new state, in engine order.
    """

    text: str
    admissible_actions: tuple[str, ...]


@dataclass(frozen=True)
class StepInfo:
    """What ``step`` reports besides the observation.

    Attributes:
        valid: False when the action was unparsable or not admissible; the state
            is then unchanged.
        won: the environment's own success check after this step.
        metrics: named numbers about the whole episode (tau's reward components),
            reported on the step that ends it and empty on the others. The trainer
            averages each name over the rollouts that report it
            (``rollout/env/<name>``, ``eval/<split>/env/<name>``).
    """

    valid: bool
    won: bool
    metrics: dict[str, float] = field(default_factory=dict, hash=False)


class ReplayMismatch(RuntimeError):
    """Replaying a recorded rollout's actions from reset showed other text than was recorded:
    the environment does not replay deterministically, so no state can be revisited."""

    def __init__(self, task_id: str, step: int, recorded: str, replayed: str):
        super().__init__(
            f"task {task_id!r} does not replay identically: after step {step} the rollout "
            f"recorded {recorded[:80]!r} but the replay shows {replayed[:80]!r}; credit truths "
            "need an environment whose reset and step are deterministic.")
        self.task_id, self.step = task_id, step


def replayed(env: Environment, task: Task, prefix: Sequence[str],
             observations: Sequence[str] | None
             ) -> Iterator[tuple[str, Observation, bool, StepInfo]]:
    """Reset ``env`` to ``task`` and play ``prefix``, yielding ``(action, observation, done,
    info)`` after each action; the caller stops where it likes (a solver at an episode's end).

    Raises:
        ReplayMismatch: the text after action ``t`` differs from ``observations[t]`` (``None``:
            not checked).
    """
    env.reset(task)
    for t, action in enumerate(prefix):
        obs, _, done, info = env.step(action)
        if observations is not None and obs.text != observations[t]:
            raise ReplayMismatch(task.task_id, t, observations[t], obs.text)
        yield action, obs, done, info


@runtime_checkable
class Environment(Protocol):
    """One episode at a time; ``reset`` may be called again with any task."""

    name: str

    def reset(self, task: Task) -> Observation:
        """Start ``task`` from its initial state."""

    def step(self, action_text: str) -> tuple[Observation, float, bool, StepInfo]:
        """Apply one action; returns (observation, reward in [0, 1], done, info)."""

    def admissible_actions(self) -> tuple[str, ...]:
        """Actions valid in the current state."""

    def snapshot(self) -> dict[str, Any]:
        """The state snapshot Φ (docs/vict.md §4.1): a flat ``variable -> value`` mapping."""

    def verifier(self, task: Task) -> Verifier:
        """The task's VICT verifier (atoms, aggregator F, original verifier V)."""

    def expert(self, task: Task) -> list[str]:
        """An action sequence that solves ``task`` from its initial state."""
