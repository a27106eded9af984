"""The tau planner of the scripted policies (``rollout.scripted``): the solver's plan from the
calls the episode made (``solver.distance_to_resolve``): the golden calls not yet executed, in
the task's order, then the closing messages. Wrong actions are well-formed calls with wrong or
missing arguments: every tool of the domain's menu with its placeholder arguments, and the
expert's own call with one argument left out."""

from __future__ import annotations

import random

from agentcredit.envs.base import Observation, StepInfo, Task
from agentcredit.envs.tau.actions import ToolCall, format_tool_call, parse_action
from agentcredit.envs.tau.engine import tau_task
from agentcredit.envs.tau.expert import closing_messages
from agentcredit.envs.tau.reward import golden_actions
from agentcredit.envs.tau.solver import call_key


class TauPlanner:
    """See the module notes; ``env`` is read for the agent's messages so far."""

    def __init__(self, env, task: Task):
        self.env = env
        _, self.tau = tau_task(task)
        golden = golden_actions(self.tau)
        self.pending = {i: (call_key(a["name"], a["arguments"]), a) for i, a in enumerate(golden)}

    def expert(self, observation: Observation) -> str | None:
        if self.pending:
            call = next(iter(self.pending.values()))[1]
            return format_tool_call(call["name"], call["arguments"])
        return closing_messages(self.tau, self.env.agent_messages)[0]

    def wrong(self, observation: Observation, expert: str | None) -> list[str]:
        actions = list(observation.admissible_actions)
        call = parse_action(expert) if expert is not None else None
        if isinstance(call, ToolCall):
            for name in call.arguments:
                actions.append(format_tool_call(call.name, {k: v for k, v in
                                                            call.arguments.items() if k != name}))
        return [a for a in actions if a != expert]

    def observe(self, action: str, observation: Observation, info: StepInfo) -> None:
        call = parse_action(action)
        if isinstance(call, ToolCall):
            key = call_key(call.name, call.arguments)
            done = next((i for i, (k, _) in self.pending.items() if k == key), None)
            if done is not None:
                del self.pending[done]


def start(env, task: Task, rng: random.Random) -> tuple[TauPlanner, Observation]:
    """``rollout.scripted.PlannerStart`` of tau (both domains)."""
    obs = env.reset(task)
    return TauPlanner(env, task), obs
