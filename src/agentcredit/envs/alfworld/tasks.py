"""ALFWorld task types: names, goal templates and the PDDL-level naming rules."""

from __future__ import annotations

import alfworld.gen.constants as alfred_constants
from alfworld.gen import goal_library

#: our task-type name -> ALFWorld's goal-library key.
TASK_TYPES: dict[str, str] = {
    "pick_and_place": "pick_and_place_simple",
    "look_at_obj_in_light": "look_at_obj_in_light",
    "pick_clean_then_place": "pick_clean_then_place_in_recep",
    "pick_heat_then_place": "pick_heat_then_place_in_recep",
    "pick_cool_then_place": "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place": "pick_two_obj_and_place",
}
#: the appliance a transformation task needs, and the state flag it sets.
TRANSFORMS: dict[str, tuple[str, str]] = {
    "pick_clean_then_place": ("SinkBasin", "isclean"),
    "pick_heat_then_place": ("Microwave", "ishot"),
    "pick_cool_then_place": ("Fridge", "iscool"),
}
_MANGLE = (("|", "_bar_"), ("-", "_minus_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_"))


def check_task_type(task_type: str) -> str:
    """Return ``task_type`` or raise naming the allowed values."""
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown ALFWorld task type {task_type!r}; "
                         f"expected one of {sorted(TASK_TYPES)}")
    return task_type


def scene_kinds_for(task_type: str) -> frozenset[str]:
    """Scene kinds in which ALFRED defines ``task_type`` (e.g. heat only in kitchens)."""
    return frozenset(alfred_constants.GOALS_VALID[TASK_TYPES[check_task_type(task_type)]])


def mangle(alfred_id: str) -> str:
    """ALFWorld's PDDL-safe spelling of an ALFRED id (``Egg|+01.00`` ->
    ``Egg_bar__plus_01_dot_00``)."""
    for char, word in _MANGLE:
        alfred_id = alfred_id.replace(char, word)
    return alfred_id


def goal_pddl(task_type: str, obj: str, recep: str = "", toggle: str = "") -> str:
    """The ``(:goal ...)`` block (plus the problem's closing paren) from ALFWorld's goal library."""
    text = goal_library.gdict[TASK_TYPES[task_type]]["pddl"].replace("#", "-")
    return text.format(obj=obj, recep=recep, toggle=toggle)


def goal_sentence(task_type: str, template_index: int, obj: str, recep: str = "",
                  toggle: str = "") -> str:
    """The task sentence from ALFWorld's templates, lower-cased as ALFWorld shows it."""
    templates = goal_library.gdict[TASK_TYPES[task_type]]["templates"]
    template = templates[template_index % len(templates)]
    return template.format(obj=obj.lower(), recep=recep.lower(), toggle=toggle.lower())
