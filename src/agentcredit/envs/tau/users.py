"""Who plays the customer: the user protocol, tau2's stop tokens, and the scripted user.

tau2 opens every conversation with the agent's greeting; the user answers it
and then every message the agent sends (tool calls go to the database, not to
the user). A reply that holds one of the stop tokens ends the conversation:
``###STOP###`` (done), ``###TRANSFER###`` (the agent handed over to a human),
``###OUT-OF-SCOPE###`` (the scenario says nothing about what was asked).

``ScriptedUser`` is a deterministic stand-in for tau2's LLM user
(``llm_user.LLMUser``) that answers from the task's user scenario:

1. a message announcing a transfer to a human agent -> ``###TRANSFER###``;
2. a closing question ("anything else?", "goodbye") -> thanks and ``###STOP###``;
3. a question about identity (name, email, zip, user id) -> the scenario's known info;
4. a request for confirmation -> "Yes, please go ahead.";
5. anything else -> the reason for the call again, until ``patience`` replies have been
   given; the next one ends the conversation with ``###STOP###``.

It opens with the scenario's reason for the call and known info, as written (in the
second person: the user reads out its task card). It is cheap and reproducible, and
what the CPU tests and the expert need; it does not negotiate, refuse, or reveal
information progressively as tau2's simulator does.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

STOP, TRANSFER, OUT_OF_SCOPE = "###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"
STOP_TOKENS = (STOP, TRANSFER, OUT_OF_SCOPE)
#: the agent's first turn in every tau2 conversation
AGENT_GREETING = "Hi! How can I help you today?"
#: the message tau2's policy tells the agent to send after ``transfer_to_human_agents``
TRANSFER_MESSAGE = "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON."
CLOSING_QUESTION = "Is there anything else I can help you with?"

_TRANSFERRED = re.compile(r"transferr?(ed|ing) (you )?to a human", re.IGNORECASE)
_CLOSING = re.compile(r"anything else|goodbye|have a (great|nice|good) day", re.IGNORECASE)
_IDENTITY = re.compile(r"\b(e-?mail|zip|postal|name|user id|user_id|identity|authenticate)\b",
                       re.IGNORECASE)
_CONFIRM = re.compile(r"\b(confirm|proceed|go ahead|yes)\b", re.IGNORECASE)


class UserUnavailable(RuntimeError):
    """The user simulator could not answer (its endpoint kept failing); ends the episode."""


class User(Protocol):
    """One conversation's customer."""

    def reply(self, agent_message: str) -> str:
        """The user's next message after ``agent_message`` (the first call gets the greeting)."""


def is_stop(message: str) -> bool:
    """Whether a user message ends the conversation."""
    return any(token in message for token in STOP_TOKENS)


def scenario_instructions(task: dict[str, Any]) -> dict[str, Any]:
    """The ``user_scenario.instructions`` of a tau2 task (fields may be None)."""
    return task["user_scenario"]["instructions"]


class ScriptedUser:
    """The deterministic user of the module notes, for the tau2 task ``task``.

    Args:
        task: the task as ``tasks.json`` holds it.
        patience: replies after the opening one before the user ends the conversation.
    """

    def __init__(self, task: dict[str, Any], patience: int):
        instructions = scenario_instructions(task)
        self.reason = " ".join((instructions.get("reason_for_call") or "").split())
        self.known = " ".join((instructions.get("known_info") or "").split())
        self.patience = patience
        self.replies = 0

    def reply(self, agent_message: str) -> str:
        first = self.replies == 0
        self.replies += 1
        if first:
            return f"Hi. {self.reason} {self.known}".strip()
        if _TRANSFERRED.search(agent_message):
            return TRANSFER
        if _CLOSING.search(agent_message):
            return f"No, that is all. Thank you! {STOP}"
        if self.replies > self.patience + 1:
            return f"I have to go now. {STOP}"
        if _IDENTITY.search(agent_message):
            return self.known or "I do not have that information."
        if _CONFIRM.search(agent_message):
            return "Yes, please go ahead."
        return f"To repeat my request: {self.reason}"
