"""JSON from untrusted text with bounded nesting and number size: a policy's tool call, a
server's answer.

``json.loads`` alone lets such text end a run: nesting a few thousand brackets deep
raises ``RecursionError``, an integer of over 4,300 digits ``ValueError`` from
Python's int-conversion limit, and ``NaN`` / ``Infinity`` parse into numbers no
JSON producer means. ``loads`` refuses all three, and any other parse failure,
with one ``JsonRefused`` (a ``ValueError``) whose message says what was wrong
as a predicate of the text (``"is not valid JSON: ..."``), for the caller to name it.
The depth is measured on the parsed value without recursion, so every check is
linear in the text.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted."""
MAX_DIGITS = 100
"""Most characters in one number literal."""


class JsonRefused(ValueError):
    """Text that is not JSON within the bounds; the message says why, in one line, as a
    predicate (``"nests arrays and objects 5000 deep (at most 64)"``)."""


def nesting_depth(value: Any) -> int:
    """How deep arrays and objects nest in the parsed ``value`` (0 for a scalar)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            stack += [(child, depth) for child in (node.values() if isinstance(node, dict)
                                                   else node)]
    return deepest


def _number(text: str) -> int | float:
    if len(text) > MAX_DIGITS:
        raise JsonRefused(f"holds a number of {len(text)} characters (at most {MAX_DIGITS})")
    return float(text) if any(c in text for c in ".eE") else int(text)


def _constant(name: str) -> float:
    raise JsonRefused(f"holds {name}, which is not a JSON number")


def loads(text: str | bytes) -> Any:
    """The JSON value of ``text``.

    Raises:
        JsonRefused: not valid JSON, nested deeper than ``MAX_DEPTH``, or holding a number
            literal longer than ``MAX_DIGITS`` characters or ``NaN`` / ``Infinity``.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as err:
            raise JsonRefused(f"is not UTF-8 text (byte {err.start})") from None
    try:
        value = json.loads(text, parse_int=_number, parse_float=_number,
                           parse_constant=_constant)
    except json.JSONDecodeError as err:
        raise JsonRefused(f"is not valid JSON: {err.msg} at character {err.pos}") from None
    except RecursionError:  # the parser's own limit, far above MAX_DEPTH
        raise JsonRefused(f"nests arrays and objects too deep (at most {MAX_DEPTH})") from None
    depth = nesting_depth(value)
    if depth > MAX_DEPTH:
        raise JsonRefused(f"nests arrays and objects {depth} deep (at most {MAX_DEPTH})")
    return value
