"""The tau solver truth's ``d(s)`` (docs/credit_check.md §2.1): the expert's steps still needed
after a prefix, with the scripted user.

tau2's reward reads the final database, the agent's messages and how the conversation ended
(``reward.py``), not the order of the calls, so the golden actions are a set: a golden action
counts as executed once the prefix called its tool with the same arguments (compared as
canonical JSON; each call executes at most one golden action, whatever the tool answered).
From the replayed state the solver makes the golden calls not yet executed, in the task's
order, then the closing messages (``expert.closing_messages``: the ``communicate_info``
message unless the agent already said every string, then the transfer message or the closing
question):

    d(s) = (golden actions not yet executed) + (closing messages still needed)

capped at ``cap``. The plan is played in the environment and counts only if it wins: a
harmful write (a state-changing call the golden actions would not make: the wrong order
cancelled, a wrong payment method) cannot be undone, so the database never matches the
golden one, the plan loses and ``d`` is ``cap``, as a dead end is on ALFWorld. So is any
ended conversation that was not won, and a plan cut short by the step or error limit or by
the user's patience. The solver is deterministic (``rng`` is unused). An LLM user does not
replay identically; its replays raise ``ReplayMismatch``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from agentcredit.envs.base import Task, replayed
from agentcredit.envs.tau.actions import ToolCall, format_tool_call, parse_action
from agentcredit.envs.tau.database import canonical_json
from agentcredit.envs.tau.engine import tau_task
from agentcredit.envs.tau.expert import closing_messages
from agentcredit.envs.tau.reward import golden_actions


def call_key(name: str, arguments: dict) -> str:
    return canonical_json({"name": name, "arguments": arguments})


def distance_to_resolve(env, task: Task, prefix: Sequence[str], cap: int,
                        rng: random.Random | None = None,
                        observations: Sequence[str] | None = None) -> int:
    """Steps the expert needs to win ``task`` from the state ``prefix`` leads to (module notes;
    ``train.evaluation.credit_check.truths.DistanceFn``).

    Raises:
        ReplayMismatch: ``observations`` (the text after each prefix action, as recorded) differ
            from what the replay shows.
    """
    _, tau = tau_task(task)
    golden = golden_actions(tau)
    pending = {i: call_key(a["name"], a["arguments"]) for i, a in enumerate(golden)}
    for action, _, done, info in replayed(env, task, prefix, observations):
        if done:
            return 0 if info.won else cap
        call = parse_action(action)
        if isinstance(call, ToolCall):
            key = call_key(call.name, call.arguments)
            executed = next((i for i, k in pending.items() if k == key), None)
            if executed is not None:
                del pending[executed]
    plan = [format_tool_call(golden[i]["name"], golden[i]["arguments"]) for i in pending]
    plan += closing_messages(tau, env.agent_messages)
    for steps, action in enumerate(plan, start=1):
        _, _, done, info = env.step(action)
        if done:
            return min(steps, cap) if info.won else cap
    return cap
