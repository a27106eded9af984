"""Load official ALFWorld game folders (``json_2.1.1/<split>/<task>/<trial>/game.tw-pddl``).

The files have the same format as the generated ones. The task type comes from
the task folder's name (``pick_heat_then_place_in_recep-Egg-None-CounterTop-1``),
the instruction from the grammar's ``Your task is to: ...`` line. Games marked
``solvable: false`` are skipped, as ALFWorld does.
"""

from __future__ import annotations

import re
from pathlib import Path

from agentcredit.envs.alfworld.game_file import GameFileError, read_game_file
from agentcredit.envs.alfworld.tasks import TASK_TYPES
from agentcredit.envs.base import Task

_INSTRUCTION = re.compile(r"Your task is to: (.+?)\.?\"", re.DOTALL)
_BY_ALFWORLD_NAME = {v: k for k, v in TASK_TYPES.items()}


def _task_type(path: Path) -> str:
    for part in reversed(path.parts):
        name = part.split("-", 1)[0]
        if name in _BY_ALFWORLD_NAME:
            return _BY_ALFWORLD_NAME[name]
    raise GameFileError(f"cannot tell the task type of {path}: no folder above it starts with "
                        f"one of {sorted(_BY_ALFWORLD_NAME)}")


def load_official_games(root: str | Path, split: str) -> list[Task]:
    """Every solvable ``game.tw-pddl`` under ``root``, sorted by path, as ``Task`` records."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"ALFWorld game folder not found: {root}")
    tasks = []
    for path in sorted(root.rglob("game.tw-pddl")):
        game = read_game_file(path)
        if not game.get("solvable", True):
            continue
        match = _INSTRUCTION.search(game["grammar"])
        if match is None:
            raise GameFileError(f"game file {path} has no 'Your task is to: ...' in its grammar")
        task_id = str(path.parent.relative_to(root))
        tasks.append(Task(task_id=task_id, env="alfworld", split=split,
                          instruction=match.group(1).strip(), task_type=_task_type(path),
                          payload={"game_file": str(path)}))
    if not tasks:
        raise FileNotFoundError(f"no solvable game.tw-pddl files under {root}")
    return tasks
