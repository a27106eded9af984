"""The tau expert: the task's golden actions, then what the reward needs said, then goodbye.

1. every golden action, in order, as a tagged tool call;
2. when the task has ``communicate_info``, one message that holds every string;
3. the policy's transfer message when the golden actions transfer to a human agent (the
   user then answers ``###TRANSFER###``), else the closing question (the user answers
   ``###STOP###``).

With the scripted user this reaches reward 1 on every task whose reward basis
is DB, COMMUNICATE and NL assertions left to a judge: all tasks of both domains
(``tests/envs/tau/test_expert.py``). It skips the confirmations the policy asks
for before each write: the scripted user does not check them, and no reward
basis of these tasks reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentcredit.envs.tau.actions import format_tool_call
from agentcredit.envs.tau.reward import communicated, golden_actions
from agentcredit.envs.tau.users import CLOSING_QUESTION, TRANSFER_MESSAGE

TRANSFER_TOOL = "transfer_to_human_agents"


def expert_actions(domain: str, task: dict[str, Any]) -> list[str]:
    """The expert's action texts for the tau2 task ``task`` of ``domain`` (module notes)."""
    return [*(format_tool_call(a["name"], a["arguments"]) for a in golden_actions(task)),
            *closing_messages(task)]


def closing_messages(task: dict[str, Any], agent_messages: Sequence[str] = ()) -> list[str]:
    """Steps 2 and 3 of the module notes: the message holding every ``communicate_info``
    string, left out when ``agent_messages`` (what the agent has said so far) already hold them
    all, then the transfer message or the closing question."""
    infos = task["evaluation_criteria"].get("communicate_info") or []
    messages = []
    if infos and not all(communicated(task, agent_messages).values()):
        messages.append("Here is what you asked about: " + "; ".join(str(i) for i in infos)
                        + ".")
    transfers = any(a["name"] == TRANSFER_TOOL for a in golden_actions(task))
    return [*messages, TRANSFER_MESSAGE if transfers else CLOSING_QUESTION]
