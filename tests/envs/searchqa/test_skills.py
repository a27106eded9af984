"""The packaged ADRS skill texts cover every search QA question type."""

from agentcredit.envs.searchqa.questions import QUESTION_TYPES
from agentcredit.skills.provider import SkillProvider


def test_every_question_type_has_a_skill_file_after_the_guide(test_tasks):
    provider = SkillProvider()
    assert provider.task_types("searchqa") == sorted(QUESTION_TYPES)
    for task in test_tasks:
        text = provider.skill_text(task)
        assert text.startswith("# Search QA: how to act") and "<answer>" in text
