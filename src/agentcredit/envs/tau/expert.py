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

from typing import Any

from agentcredit.envs.tau.actions import format_tool_call
from agentcredit.envs.tau.reward import golden_actions
from agentcredit.envs.tau.users import CLOSING_QUESTION, TRANSFER_MESSAGE

TRANSFER_TOOL = "transfer_to_human_agents"


def expert_actions(domain: str, task: dict[str, Any]) -> list[str]:
    """The expert's action texts for the tau2 task ``task`` of ``domain`` (module notes)."""
    actions = [format_tool_call(a["name"], a["arguments"]) for a in golden_actions(task)]
    infos = task["evaluation_criteria"].get("communicate_info") or []
    if infos:
        actions.append("Here is what you asked about: " + "; ".join(str(i) for i in infos)
                       + ".")
    transfers = any(a["name"] == TRANSFER_TOOL for a in golden_actions(task))
    actions.append(TRANSFER_MESSAGE if transfers else CLOSING_QUESTION)
    return actions
