"""Parse the policy's response into an environment action (docs/backbones.md §2: invalid actions).

Three formats:

- ``bare``: the whole response, stripped, is the action (the embedded tiny model).
- ``tagged``: ``<think>…</think>`` (optional) then ``<action>…</action>``, as
  real instruction-tuned LLMs are prompted to answer; the last ``<action>``
  block is the action.
- ``raw``: the whole response, stripped, free reasoning and line breaks included,
  goes to the environment, which finds its action and decides its validity itself:
  for environments whose protocol is a response format of its own (Search-R1's
  reasoning followed by a ``<search>`` or ``<answer>`` block, ``envs.searchqa``).

An empty or unparsable response gives ``None``; the collector then marks the
step invalid and sends the raw text to the environment, which answers it
("Nothing happens.") without changing state.
"""

from __future__ import annotations

import re
from typing import Literal

ActionFormat = Literal["bare", "tagged", "raw"]
ACTION_FORMATS: tuple[str, ...] = ("bare", "tagged", "raw")

_ACTION_TAG = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_THINK_BLOCK = re.compile(r"^\s*(<think>.*?</think>)?\s*", re.DOTALL | re.IGNORECASE)

FORMAT_INSTRUCTIONS: dict[str, str] = {
    "bare": "Reply with exactly one admissible action and nothing else.",
    "tagged": (
        "Think step by step inside <think> </think> if you need to, then give exactly one "
        "admissible action inside <action> </action>."
    ),
    "raw": (
        "Reason step by step as long as you need to, then end your reply with exactly one "
        "action, written in the tags the task describes."
    ),
}


def parse_action(response: str, action_format: ActionFormat) -> str | None:
    """The action in ``response``, or ``None`` when it cannot be parsed.

    ``bare``: the stripped response; ``None`` if empty or spanning several lines.
    ``tagged``: the stripped content of the last ``<action>`` block; ``None``
    when there is none, when it is empty, or when text other than one leading
    ``<think>`` block precedes the first ``<action>``.
    ``raw``: the stripped response, several lines included; ``None`` if empty.
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
    if action_format == "raw":
        return response.strip() or None
    raise ValueError(f"unknown action format {action_format!r}; choose one of {ACTION_FORMATS}")


def format_action(action: str, action_format: ActionFormat) -> str:
    """The response text that ``parse_action`` maps back to ``action`` (SFT targets)."""
    if action_format in ("bare", "raw"):
        return action
    if action_format == "tagged":
        return f"<action>{action}</action>"
    raise ValueError(f"unknown action format {action_format!r}; choose one of {ACTION_FORMATS}")
