"""Calling a domain's tools as tau2's environment does: a name and arguments in, a
``ToolMessage``-like outcome out, never an exception.

tau2 answers every call with a tool message: the result (a string as is, a
record as JSON) or ``"Error: <text>"`` when the tool raised, with
``"Tool '<name>' not found."`` for an unknown name and Python's own text for
arguments that do not fit the tool's signature. ``call_tool`` does the same
and also says which kind of failure it was, so the environment can mark
the unknown tools and the bad arguments invalid (docs/tau.md, "Actions").
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from agentcredit.envs.tau.actions import format_tool_call
from agentcredit.envs.tau.airline_tools import AirlineTools
from agentcredit.envs.tau.database import Database
from agentcredit.envs.tau.retail_tools import RetailTools

TOOLKITS = {"retail": RetailTools, "airline": AirlineTools}
#: ``ToolOutcome.kind`` values
OK, TOOL_ERROR, UNKNOWN_TOOL, BAD_ARGUMENTS = "ok", "tool_error", "unknown_tool", "bad_arguments"


@dataclass(frozen=True)
class ToolOutcome:
    """One tool call's answer.

    Attributes:
        content: tau2's tool message content: the result, or ``"Error: <text>"``.
        error: tau2's ``ToolMessage.error``: the call raised.
        kind: ``ok``, ``tool_error`` (the tool refused: unknown order, wrong status …),
            ``unknown_tool`` or ``bad_arguments`` (the arguments do not fit the signature).
    """

    content: str
    error: bool
    kind: str


def make_toolkit(domain: str, db: Database) -> RetailTools | AirlineTools:
    """The tools of ``domain`` over ``db``."""
    try:
        return TOOLKITS[domain](db)
    except KeyError:
        raise ValueError(f"unknown tau2 domain {domain!r}; expected one of "
                         f"{tuple(TOOLKITS)}") from None


def result_content(result: Any) -> str:
    """tau2's message content of a tool result: a string as is, anything else as JSON."""
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


def call_tool(toolkit: RetailTools | AirlineTools, name: Any,
              arguments: dict[str, Any]) -> ToolOutcome:
    """Run tool ``name`` with keyword ``arguments``; every failure is an answer (module notes)."""
    if not isinstance(name, str) or name not in toolkit.TOOLS:
        return ToolOutcome(f"Error: Tool '{name}' not found.", True, UNKNOWN_TOOL)
    tool = getattr(toolkit, name)
    try:
        inspect.signature(tool).bind(**arguments)
        kind = TOOL_ERROR
    except TypeError:
        kind = BAD_ARGUMENTS  # the call below raises Python's own message, before the body runs
    try:
        return ToolOutcome(result_content(tool(**arguments)), False, OK)
    except Exception as err:  # noqa: BLE001 - tau2 turns every tool failure into its message
        return ToolOutcome(f"Error: {err}", True, kind)


@cache
def tool_templates(domain: str) -> tuple[str, ...]:
    """One tagged call per tool of ``domain`` with ``"<argument>"`` placeholders
    (``<tool_call>{"name": "get_order_details", "arguments": {"order_id": "<order_id>"}}
    </tool_call>``): the tool menu the agent is shown as its admissible actions."""
    toolkit = TOOLKITS[domain]
    return tuple(format_tool_call(name, {p: f"<{p}>" for p in
                                         inspect.signature(getattr(toolkit, name)).parameters
                                         if p != "self"})
                 for name in toolkit.TOOLS)
