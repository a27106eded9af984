"""Privileged skills for ADRS (docs/adrs.md §5.1): the provider, the prefix format and where it
goes."""

from agentcredit.skills.prefix import (
    SKILL_HEADER,
    SkillSplicer,
    insert_skill,
    skill_prefix,
    with_skill_prompts,
)
from agentcredit.skills.provider import SkillNotFoundError, SkillProvider, default_skill_root

__all__ = [
    "SKILL_HEADER",
    "SkillNotFoundError",
    "SkillProvider",
    "SkillSplicer",
    "default_skill_root",
    "insert_skill",
    "skill_prefix",
    "with_skill_prompts",
]
