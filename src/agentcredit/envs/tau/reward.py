"""tau2's task reward from the task's reward basis (tau2 ``evaluator``), for one finished
conversation.

- The conversation must have ended by the user (or the agent) stopping; ended by the step
  limit, too many tool errors or a user that could not answer, the reward is 0.
- ``DB``: the golden actions are replayed on a fresh database (a failing one is skipped,
  as tau2 does); the component is 1 iff its fingerprint equals the rollout's.
- ``COMMUNICATE``: 1 iff every ``communicate_info`` string occurs in some agent message,
  compared as tau2 does: lower-cased, with the message's commas removed.
- ``NL_ASSERTION``: needs a judge model (``judge.py``). With none configured (or no
  verdict from it) and assertions to check, the component is skipped (reported in
  ``skipped``; it does not count); with no assertions it is 1, as in tau2.

The reward is the product of the components of the task's basis that were evaluated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from agentcredit.envs.tau.database import Database
from agentcredit.envs.tau.domains import load_domain
from agentcredit.envs.tau.toolkit import call_tool, make_toolkit

DB, COMMUNICATE, NL_ASSERTION = "DB", "COMMUNICATE", "NL_ASSERTION"
BASES = (DB, COMMUNICATE, NL_ASSERTION)
#: how a conversation may end; only the first two can earn a reward
USER_STOP, AGENT_STOP, MAX_STEPS, TOO_MANY_ERRORS, USER_ERROR = (
    "user_stop", "agent_stop", "max_steps", "too_many_errors", "user_error")
REWARDED_ENDINGS = (USER_STOP, AGENT_STOP)

#: ``judge(task, conversation, assertions) -> 1.0 (all hold), 0.0, or None (no verdict: skip)``;
#: the conversation is chat messages, ``{"role": "assistant" | "user", "content": ...}``
Judge = Callable[[dict[str, Any], Sequence[dict[str, str]], Sequence[str]], "float | None"]


@dataclass(frozen=True)
class RewardInfo:
    """One conversation's reward and how it was made.

    Attributes:
        reward: tau2's task reward, 0 or 1.
        components: basis -> 0/1, for each basis of the task that was evaluated.
        skipped: bases of the task that were not evaluated (``NL_ASSERTION`` without a judge).
        ending: how the conversation ended (``user_stop``, ``max_steps`` …).
        communicated: each ``communicate_info`` string -> whether an agent message held it.
    """

    reward: float
    components: dict[str, float]
    skipped: tuple[str, ...]
    ending: str
    communicated: dict[str, bool] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        """The components for the trainer's metrics (``StepInfo.metrics``): each evaluated one
        under its basis lower-cased (``db``, ``communicate``, ``nl_assertion``), and, when the
        basis has NL assertions, ``nl_assertion_skipped``: 1 when no judge scored them, else 0."""
        metrics = {basis.lower(): value for basis, value in self.components.items()}
        if NL_ASSERTION in self.components or NL_ASSERTION in self.skipped:
            metrics["nl_assertion_skipped"] = float(NL_ASSERTION in self.skipped)
        return metrics


def reward_basis(task: dict[str, Any]) -> tuple[str, ...]:
    """The task's reward basis; an error names a basis this environment cannot compute."""
    basis = tuple(task["evaluation_criteria"].get("reward_basis") or ())
    unknown = [b for b in basis if b not in BASES]
    if unknown:
        raise ValueError(f"tau2 task {task['id']!r} has reward basis {unknown}; this "
                         f"environment computes {BASES}")
    return basis


def golden_actions(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The task's golden actions (name, arguments), in order."""
    return list(task["evaluation_criteria"].get("actions") or [])


def replay_golden(domain: str, task: dict[str, Any]) -> Database:
    """A fresh database after the task's golden actions (failing ones change nothing)."""
    db = Database(load_domain(domain).db)
    toolkit = make_toolkit(domain, db)
    for action in golden_actions(task):
        call_tool(toolkit, action["name"], dict(action["arguments"]))
    return db


@lru_cache(maxsize=512)
def golden_fingerprint(domain: str, task_id: str) -> str:
    """The fingerprint of the golden database of task ``task_id`` (computed once)."""
    return replay_golden(domain, load_domain(domain).tasks[task_id]).fingerprint()


def communicated(task: dict[str, Any], agent_messages: Sequence[str]) -> dict[str, bool]:
    """Each ``communicate_info`` string -> whether some agent message holds it (tau2's test)."""
    said = [m.lower().replace(",", "") for m in agent_messages]
    return {info: any(str(info).lower() in m for m in said)
            for info in task["evaluation_criteria"].get("communicate_info") or []}


def task_reward(domain: str, task: dict[str, Any], db_fingerprint: str,
                agent_messages: Sequence[str], ending: str, judge: Judge | None = None,
                conversation: Sequence[dict[str, str]] = ()) -> RewardInfo:
    """tau2's reward of a conversation that ended with ``ending`` (module notes)."""
    basis = reward_basis(task)
    told = communicated(task, agent_messages)
    components: dict[str, float] = {}
    skipped: list[str] = []
    if DB in basis:
        components[DB] = float(db_fingerprint == golden_fingerprint(domain, task["id"]))
    if COMMUNICATE in basis:
        components[COMMUNICATE] = float(all(told.values()))
    if NL_ASSERTION in basis:
        assertions = task["evaluation_criteria"].get("nl_assertions") or []
        if not assertions:
            components[NL_ASSERTION] = 1.0
        else:
            verdict = None if judge is None else judge(task, conversation, assertions)
            if verdict is None:
                skipped.append(NL_ASSERTION)
            else:
                components[NL_ASSERTION] = float(verdict)
    reward = 1.0
    for value in components.values():
        reward *= value
    if ending not in REWARDED_ENDINGS:
        reward = 0.0
    return RewardInfo(reward, components, tuple(skipped), ending, told)
