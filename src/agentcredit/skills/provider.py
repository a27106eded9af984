"""The privileged skill provider of ADRS (docs/adrs.md §5.1): task → skill text, deterministically.

The skill text ``ρ(x)`` of a task is the environment-level guide followed by
the one file matched to the task's type::

    texts/<env>/guide.md          how to act in the environment, for every task
    texts/<env>/<task_type>.md    the procedure, action rules and common failures of one type

joined by a blank line. ALFWorld has one file per task type (the six names of
``agentcredit.envs.alfworld.tasks.TASK_TYPES``); WebShop follows the same
convention with the product category as ``task_type``, tau with the first write
tool of the golden actions (``envs/tau/tasks.py``). Selection is a file
lookup, never retrieval, so the same task always gets the same text.

Skill text is training-only: the teacher rescoring pass reads it
(``train/scoring/teacher.py``); rollouts and evaluation never see it, except in the
``skill_prompt`` / ``skill_grpo`` / ``skill_grpo*`` baselines (docs/adrs.md §5.6).
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from agentcredit.envs.base import Task

GUIDE_FILE = "guide.md"


class SkillNotFoundError(FileNotFoundError):
    """A skill file the provider needs does not exist; the message names the path."""


def default_skill_root() -> Traversable:
    """The skill texts shipped with agentcredit (``agentcredit/skills/texts``)."""
    return resources.files("agentcredit.skills") / "texts"


class SkillProvider:
    """Deterministic skill lookup: ``skill_text(task)`` = guide + task-type file.

    Args:
        root: the folder holding one sub-folder per environment; ``None`` uses
            the texts shipped with the package. Pass your own folder to try
            other skills without editing the package.

    Texts are read once per ``(env, task_type)`` and cached; trailing
    whitespace of each file is dropped so an editor's final newline does not
    change the prefix.
    """

    def __init__(self, root: str | Path | Traversable | None = None) -> None:
        self.packaged = root is None
        self.root: Traversable = default_skill_root() if root is None else (
            Path(root) if isinstance(root, str) else root)
        self._cache: dict[tuple[str, str], str] = {}

    def skill_text(self, task: Task) -> str:
        """``ρ(x)``: the skill text for ``task`` (its ``env`` and ``task_type``)."""
        return self.text_for(task.env, task.task_type)

    def text_for(self, env: str, task_type: str) -> str:
        """The guide of ``env`` followed by the file of ``task_type``, separated by a blank line."""
        key = (env, task_type)
        if key not in self._cache:
            guide = self._read(env, GUIDE_FILE, what="environment guide")
            specific = self._read(env, f"{task_type}.md", what=f"skill file of task type "
                                                                f"{task_type!r}")
            self._cache[key] = f"{guide}\n\n{specific}"
        return self._cache[key]

    def has_texts(self, env: str) -> bool:
        """Whether the root holds a skill folder for ``env``."""
        return (self.root / env).is_dir()

    def task_types(self, env: str) -> list[str]:
        """The task types of ``env`` that have a skill file, sorted."""
        folder = self._env_folder(env)
        return sorted(item.name[:-3] for item in folder.iterdir()
                      if item.name.endswith(".md") and item.name != GUIDE_FILE)

    def corpus(self, env: str) -> list[str]:
        """Every skill text of ``env`` (one per task type), e.g. to fit a tokenizer on them."""
        return [self.text_for(env, task_type) for task_type in self.task_types(env)]

    def _env_folder(self, env: str) -> Traversable:
        folder = self.root / env
        if not folder.is_dir():
            known = sorted(item.name for item in self.root.iterdir() if item.is_dir()) \
                if self.root.is_dir() else []
            shipped = ", ".join(known) or "none"
            if self.packaged:  # never point a user into the installed package
                fix = (f"agentcredit ships skill texts for {shipped} only; set skills.root=DIR "
                       f"to a folder holding {env}/{GUIDE_FILE} and one {env}/<task_type>.md "
                       "per task type")
            else:
                fix = (f"expected the folder {folder} with {GUIDE_FILE} and one <task_type>.md "
                       f"per task type (environments with skills there: {shipped})")
            raise SkillNotFoundError(f"no skill texts for environment {env!r}: {fix}")
        return folder

    def _read(self, env: str, name: str, what: str) -> str:
        path = self._env_folder(env) / name
        if not path.is_file():
            raise SkillNotFoundError(
                f"missing {what} for environment {env!r}: {path} does not exist. Add it, or "
                f"check the task type (files present: "
                f"{', '.join(sorted(i.name for i in self._env_folder(env).iterdir()))})."
            )
        text = path.read_text(encoding="utf-8").rstrip()
        if not text:
            raise SkillNotFoundError(f"{what} {path} is empty; write the skill text into it.")
        return text
