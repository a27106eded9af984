"""Calling a domain's tools as tau2's environment does: a name and arguments in, a
``ToolMessage``-like outcome out, never an exception.

tau2 answers every call with a tool message: the result (a string as is, a
record as JSON) or ``"Error: <text>"`` when the tool raised, with
``"Tool '<name>' not found."`` for an unknown name and Python's own text for
arguments that do not fit the tool's signature. ``call_tool`` does the same
and also says which kind of failure it was, so the environment can mark
the unknown tools and the bad arguments invalid (docs/tau.md, "Actions").

The database takes only what its fingerprint can encode: the reward hashes the
database as UTF-8, so an argument holding a string (or a key) that UTF-8 cannot
encode, a lone surrogate such as ``"\\ud800"`` that JSON escapes can carry, is
refused before the tool runs, as a bad-arguments answer naming the argument.
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
    bad = unencodable_argument(arguments)
    if bad:
        return ToolOutcome(f"Error: argument {bad} holds text that is not valid Unicode (a lone "
                           "surrogate, which UTF-8 cannot encode); send plain text", True,
                           BAD_ARGUMENTS)
    try:
        inspect.signature(tool).bind(**arguments)
        kind = TOOL_ERROR
    except TypeError:
        kind = BAD_ARGUMENTS  # the call below raises Python's own message, before the body runs
    try:
        return ToolOutcome(result_content(tool(**arguments)), False, OK)
    except Exception as err:  # noqa: BLE001 - tau2 turns every tool failure into its message
        return ToolOutcome(f"Error: {err}", True, kind)


def unencodable_argument(arguments: dict[str, Any]) -> str:
    """The first place in ``arguments`` (``'address1'``, ``'passengers'[0]``) whose string or
    key UTF-8 cannot encode, or ``""``; the walk is iterative (parsed JSON is at most 64 deep,
    but a caller may pass anything)."""
    stack: list[tuple[str, Any]] = [(repr(k), v) for k, v in arguments.items()]
    stack += [(repr(k), k) for k in arguments]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return where
        elif isinstance(value, dict):
            stack += [(f"{where}[{k!r}]", v) for k, v in value.items()]
            stack += [(where, k) for k in value]
        elif isinstance(value, list | tuple):
            stack += [(f"{where}[{i}]", v) for i, v in enumerate(value)]
    return ""


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
