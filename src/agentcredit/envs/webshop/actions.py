"""WebShop's action grammar: ``search[<query>]`` and ``click[<label>]``.

The engine steps on parsed actions and the verifier recognises the commit
(``click[buy now]``) with the same parser, so both read an action alike.
"""

from __future__ import annotations

import re
from typing import Any

_ACTION = re.compile(r"\s*(search|click)\s*\[(.*)\]\s*", re.DOTALL | re.IGNORECASE)


def parse_action(action_text: Any) -> tuple[str, str] | None:
    """``(verb, argument)`` of ``search[...]`` / ``click[...]``; click labels lower-cased."""
    if not isinstance(action_text, str):
        return None
    match = _ACTION.fullmatch(action_text)
    if match is None:
        return None
    verb, arg = match.group(1).lower(), match.group(2).strip()
    return verb, arg.lower() if verb == "click" else arg
