"""The Search-R1 protocol: what the agent writes, what it reads back.

The agent may reason freely, then writes ``<search> query </search>`` or
``<answer> text </answer>``. The *last* complete block of either kind in the
response is its action (so reasoning that quotes a tag earlier, or the
prompt's own example answer repeated, never decides): the block that ends at the
last closing tag with an opening tag of its kind before it, opened by the nearest
such tag. Tags are case-sensitive, as in Search-R1. Search-R1's generator stops at
the first closing tag, so its responses hold one block and the two rules agree on
them. Parsing is linear in the response (a backtracking regular expression takes
seconds on ten thousand unclosed tags).

A search is answered with the top ``k`` passages inside ``<information>``,
one per line, as Search-R1's ``_passages2string`` writes them:
``Doc i(Title: <title>) <text>``. A response with neither block is answered with
Search-R1's correction message (``CORRECTION``) and costs a turn.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agentcredit.envs.searchqa.corpus import Passage

#: Search-R1's answer to a response with neither a search nor an answer block.
CORRECTION = ("My previous action is invalid. If I want to search, I should put the query "
              "between <search> and </search>. If I want to give the final answer, I should "
              "put the answer between <answer> and </answer>. Let me try again.")
#: the example answer the instruction shows (the "trap": it must never score by itself).
EXAMPLE_ANSWER = "Beijing"
INSTRUCTION = (
    "Answer the question below. Reason as much as you need first. To look something up, "
    "write <search> query </search>; the best passages come back between <information> and "
    "</information>. You may search several times. Once you know the answer, give it, short "
    "and without explanation, as <answer> text </answer>, for example "
    f"<answer> {EXAMPLE_ANSWER} </answer>. Question: {{question}}")

KINDS = ("search", "answer")


@dataclass(frozen=True)
class Action:
    """A parsed response.

    Attributes:
        kind: ``search``, ``answer``, or ``None`` when the response holds neither block.
        content: the block's text, stripped ("" when ``kind`` is None).
    """

    kind: str | None
    content: str = ""


def _last_block(text: str, kind: str) -> tuple[int, str] | None:
    """``(end, content)`` of the last complete ``kind`` block of ``text``, or None."""
    close = text.rfind(f"</{kind}>")
    if close < 0:
        return None
    start = text.rfind(f"<{kind}>", 0, close)
    if start < 0:  # no opening tag precedes even the last closing one: no block at all
        return None
    return close, text[start + len(kind) + 2:close]


def parse_response(text: str) -> Action:
    """The action of a response: its last complete ``<search>`` or ``<answer>`` block."""
    blocks = [(block, kind) for kind in KINDS if (block := _last_block(text, kind))]
    if not blocks:
        return Action(None)
    (_, content), kind = max(blocks)
    return Action(kind, content.strip())


def last_answer(text: str) -> str | None:
    """The stripped content of the last ``<answer>`` block of ``text``, or ``None``."""
    block = _last_block(text, "answer")
    return block[1].strip() if block else None


def search_action(query: str) -> str:
    """The response that searches ``query``."""
    return f"<search> {query} </search>"


def answer_action(answer: str) -> str:
    """The response that answers ``answer``."""
    return f"<answer> {answer} </answer>"


def information(passages: Sequence[Passage]) -> str:
    """The observation of a search: ``<information>`` holding ``Doc i(Title: ...) text`` lines."""
    lines = "\n".join(f"Doc {i}(Title: {p.title}) {p.text}"
                      for i, p in enumerate(passages, start=1))
    return f"<information>{lines}</information>"


_DOC_TITLE = re.compile(r"^Doc \d+\(Title: (.*?)\) ", re.MULTILINE)


def shown_titles(observation: str) -> tuple[str, ...]:
    """The titles of the passages an ``information`` observation shows, in order."""
    start, end = observation.find("<information>"), observation.rfind("</information>")
    if start < 0 or end < start:
        return ()
    return tuple(_DOC_TITLE.findall(observation[start + len("<information>"):end]))
