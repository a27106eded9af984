"""An error's details as they go into one line a user reads: the first line of an
exception's message (``first_line``) and a value cut to a length a message can hold
(``short``). A leaf: no other agentcredit module, no torch."""

from __future__ import annotations

from typing import Any

#: what the CLI's ``error:`` line says of an error that has no message
NO_MESSAGE = "(no message)"


def first_line(err: BaseException, empty: str | None = None) -> str:
    """The first line of ``err``'s message (stripped of the blank around it); for an error
    with no message, ``empty``, or the error's type name when ``empty`` is ``None`` (the CLI
    passes ``NO_MESSAGE``; a clause inside a longer message names the type)."""
    lines = str(err).strip().splitlines()
    if lines:
        return lines[0]
    return type(err).__name__ if empty is None else empty


def short(value: Any) -> str:
    """``repr(value)``, cut to 40 characters (37 and ``...``) so a crafted value cannot
    flood the line that names it."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
