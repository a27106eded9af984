"""The search QA expert, for SFT and tests: search each hop's passage by its title, in hop
order, then answer with the canonical golden answer.

It is privileged (it reads the question's hops), and exact on generated questions: a
question is kept only when every hop's title retrieves its passage (``tasks.solvable``).
FlashRAG questions carry no hops, so they have no expert.
"""

from __future__ import annotations

from agentcredit.envs.searchqa.protocol import answer_action, search_action
from agentcredit.envs.searchqa.questions import Question


def expert_actions(question: Question) -> list[str]:
    """The expert's responses for ``question`` (see the module notes)."""
    if not question.hops:
        raise ValueError(f"question {question.text!r} has no supporting passages (a FlashRAG "
                         "question), so there is no expert; train such data with sft.enabled="
                         "false and a real checkpoint")
    return [*(search_action(hop.title) for hop in question.hops),
            answer_action(question.answers[0])]
