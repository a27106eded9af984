"""The skill texts a run reads (``skills.SkillProvider``, docs/adrs.md §5): every task's text
checked before anything runs, and the texts' share of the embedded tokenizer's corpus."""

from __future__ import annotations

from collections.abc import Iterable

from agentcredit.envs.base import Task
from agentcredit.skills import SkillProvider

# BPE merges a pair only when it occurs twice (TinyModelConfig.min_frequency): each
# task-type file occurs once in the corpus, so it goes in twice.
_SKILL_CORPUS_COPIES = 2


def check_skill_texts(provider: SkillProvider, tasks: Iterable[Task]) -> None:
    """Raise ``SkillNotFoundError`` (naming the missing file) unless every task has its skill."""
    for env, task_type in sorted({(task.env, task.task_type) for task in tasks}):
        provider.text_for(env, task_type)


def skill_tokenizer_corpus(provider: SkillProvider, env: str) -> list[str]:
    """The skill texts of ``env`` for the embedded tokenizer, so a skill is not spelled out byte
    by byte; none when ``env`` has no skills.

    Added for every method alike, so a comparison's runs share one tokenizer and one start.
    """
    if not provider.has_texts(env):
        return []
    return provider.corpus(env) * _SKILL_CORPUS_COPIES
