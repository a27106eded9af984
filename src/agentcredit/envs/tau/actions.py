"""The agent's action in tau: one tool call, or one message to the user (tau2 allows either in
a turn, never both).

- A tool call is a JSON object ``{"name": <tool>, "arguments": {...}}``, written in a
  ``<tool_call>…</tool_call>`` tag (the form the expert and the prompt use); a response
  that starts with ``{`` is read as an untagged call, since LLMs often drop the tag.
  ``arguments`` may be left out when a tool takes none.
- Anything else is a message to the user.

``parse_action`` never raises: text that looks like a tool call but is not one
(invalid JSON, nesting deeper or numbers longer than ``envs.bounded_json`` accepts)
comes back as ``Malformed`` with the observation to show.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentcredit.envs import bounded_json

OPEN, CLOSE = "<tool_call>", "</tool_call>"


@dataclass(frozen=True)
class ToolCall:
    """A call of tool ``name`` with keyword ``arguments``."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Message:
    """Text for the user."""

    text: str


@dataclass(frozen=True)
class Malformed:
    """An action that is neither: ``error`` is the observation (``"Error: ..."``)."""

    error: str


def format_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """The tagged one-line action text of a call (what ``parse_action`` reads back)."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{OPEN}{body}{CLOSE}"


def parse_action(text: Any) -> ToolCall | Message | Malformed:
    """The action ``text`` stands for (module notes)."""
    if not isinstance(text, str):
        return Malformed("Error: an action is text: a tool call or a message to the user")
    stripped = text.strip()
    if not stripped:
        return Malformed("Error: the action is empty; write a tool call or a message to the "
                         "user")
    if stripped.startswith(OPEN):
        if not stripped.endswith(CLOSE):
            return Malformed(f"Error: a tool call must end with {CLOSE}")
        return _tool_call(stripped[len(OPEN):-len(CLOSE)])
    if stripped.startswith("{"):
        return _tool_call(stripped)
    return Message(stripped)


def _tool_call(body: str) -> ToolCall | Malformed:
    try:
        call = bounded_json.loads(body)
    except bounded_json.JsonRefused as err:
        return Malformed(f"Error: the tool call {err}")
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return Malformed('Error: a tool call is a JSON object {"name": <tool name>, '
                         '"arguments": {...}}')
    arguments = call.get("arguments", {})
    if not isinstance(arguments, dict):
        return Malformed(f"Error: the arguments of {call['name']} must be a JSON object, not "
                         f"{type(arguments).__name__}")
    unknown = sorted(set(call) - {"name", "arguments"})
    if unknown:
        return Malformed(f"Error: a tool call has only \"name\" and \"arguments\"; found "
                         f"{', '.join(unknown)}")
    return ToolCall(call["name"], arguments)
