"""Parse the policy's response into an environment action (docs/backbones.md §2: invalid actions).

Two formats:

- ``bare``: the whole response, stripped, is the action (the embedded tiny model).
- ``tagged``: ``<think>…</think>`` (optional) then ``<action>…</action>``, as
  real instruction-tuned LLMs are prompted to answer; the last ``<action>``
  block is the action.

An empty or unparsable response gives ``None``; the collector then marks the
step invalid and sends the raw text to the environment, which answers it
("Nothing happens.") without changing state.
"""

from __future__ import annotations

import re
from typing import Literal

ActionFormat = Literal["bare", "tagged"]
ACTION_FORMATS: tuple[str, ...] = ("bare", "tagged")

_ACTION_TAG = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_THINK_BLOCK = re.compile(r"^\s*(<think>.*?</think>)?\s*", re.DOTALL | re.IGNORECASE)

FORMAT_INSTRUCTIONS: dict[str, str] = {
    "bare": "Reply with exactly one admissible action and nothing else.",
    "tagged": (
        "Think step by step inside <think> </think> if you need to, then give exactly one "
        "admissible action inside <action> </action>."
    ),
}


def parse_action(response: str, action_format: ActionFormat) -> str | None:
    """The action in ``response``, or ``None`` when it cannot be parsed.

    ``bare``: the stripped response; ``None`` if empty or spanning several lines.
    ``tagged``: the stripped content of the last ``<action>`` block; ``None``
    when there is none, when it is empty, or when text other than one leading
    ``<think>`` block precedes the first ``<action>``.
    """
    if action_format == "bare":
        action = response.strip()
        return action if action and "\n" not in action else None
    if action_format == "tagged":
        matches = list(_ACTION_TAG.finditer(response))
        if not matches:
            return None
        preamble = response[: matches[0].start()]
        if _THINK_BLOCK.fullmatch(preamble) is None:
            return None
        action = matches[-1].group(1).strip()
        return action if action and "\n" not in action else None
    raise ValueError(f"unknown action format {action_format!r}; choose one of {ACTION_FORMATS}")


def format_action(action: str, action_format: ActionFormat) -> str:
    """The response text that ``parse_action`` maps back to ``action`` (SFT targets)."""
    if action_format == "bare":
        return action
    if action_format == "tagged":
        return f"<action>{action}</action>"
    raise ValueError(f"unknown action format {action_format!r}; choose one of {ACTION_FORMATS}")
