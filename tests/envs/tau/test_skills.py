"""The packaged ADRS skill texts cover every tau task type, and every tool call they write names a
tool of the domain with its exact arguments."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from agentcredit.envs.tau.tasks import ENV_NAMES, NO_WRITE, build_tasks
from agentcredit.envs.tau.toolkit import TOOLKITS
from agentcredit.skills.provider import SkillProvider
from agentcredit.train.warm_start.skill_texts import check_skill_texts

CALL = re.compile(r"\b([a-z]+(?:_[a-z]+)*)\(([^()]*)\)")
MAX_WORDS = 160  # the length of the ALFWorld and WebShop texts


def test_every_tau_task_type_has_a_skill_text_and_nothing_else_does(domain):
    provider, env = SkillProvider(), ENV_NAMES[domain.name]
    possible = {*TOOLKITS[domain.name].WRITE_TOOLS, NO_WRITE}  # what tasks.task_type can return
    assert provider.task_types(env) == sorted(possible)
    tasks = build_tasks(domain.name, "base")
    check_skill_texts(provider, tasks)
    heading = f"# {domain.name.capitalize()} desk: how to act"
    assert all(provider.skill_text(task).startswith(heading) for task in tasks)


def test_tau_skill_calls_name_the_domains_tools_with_their_arguments_and_stay_short(domain):
    provider, toolkit = SkillProvider(), TOOLKITS[domain.name]
    folder = Path(str(provider.root)) / ENV_NAMES[domain.name]
    for task_type in provider.task_types(ENV_NAMES[domain.name]):
        text = (folder / f"{task_type}.md").read_text()
        assert len(text.split()) <= MAX_WORDS, task_type
        if task_type != NO_WRITE:  # a write type's file shows its own tool's call
            assert f"{task_type}(" in text, task_type
    for path in sorted(folder.iterdir()):
        calls = CALL.findall(path.read_text())
        assert calls, path.name
        for name, arguments in calls:
            assert name in toolkit.TOOLS, (path.name, name)
            expected = list(inspect.signature(getattr(toolkit, name)).parameters)[1:]  # no self
            assert [a.strip() for a in arguments.split(",") if a.strip()] == expected, \
                (path.name, name)
