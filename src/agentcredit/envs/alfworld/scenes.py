"""The ALFRED scene layouts and object rules that the ``alfworld`` package ships.

A scene is one ``FloorPlanN``: its receptacle instances with their navigation
poses (``FloorPlanN-openable.json``) and the object and receptacle types it
contains (``FloorPlanN-objects.json``). Some receptacle types appear only in
the objects file (stove burners, coffee machines, toasters, garbage cans, towel
holders); ``load_scene`` adds one instance of each with a synthetic pose so that
tasks needing them can be generated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

import alfworld.gen.constants as alfred_constants

SCENE_KINDS = {"Kitchen": range(1, 31), "LivingRoom": range(201, 231),
               "Bedroom": range(301, 331), "Bathroom": range(401, 431)}
TRAIN_SCENES = tuple(alfred_constants.TRAIN_SCENE_NUMBERS)
HELD_OUT_SCENES = tuple(alfred_constants.TEST_SCENE_NUMBERS)

#: receptacle type -> object types it can hold (ALFRED's ``canContain`` rules).
CAN_CONTAIN: dict[str, frozenset[str]] = {
    rtype: frozenset(objs) for rtype, objs in alfred_constants.VAL_RECEPTACLE_OBJECTS.items()
}
MOVABLE_RECEPTACLES = frozenset(alfred_constants.MOVABLE_RECEPTACLES)
STATIC_RECEPTACLE_TYPES = frozenset(CAN_CONTAIN) - MOVABLE_RECEPTACLES
OPENABLE_TYPES = frozenset(alfred_constants.OPENABLE_CLASS_LIST)
#: object types any static receptacle can hold, i.e. the ones an agent can pick up.
PICKUPABLE_TYPES = frozenset().union(
    *(CAN_CONTAIN[r] for r in STATIC_RECEPTACLE_TYPES)
) - STATIC_RECEPTACLE_TYPES
HEATABLE = frozenset(alfred_constants.VAL_ACTION_OBJECTS["Heatable"])
COOLABLE = frozenset(alfred_constants.VAL_ACTION_OBJECTS["Coolable"])
CLEANABLE = frozenset(alfred_constants.VAL_ACTION_OBJECTS["Cleanable"])
TOGGLEABLE = frozenset(alfred_constants.VAL_ACTION_OBJECTS["Toggleable"])
#: sliced variants never appear in generated games: nothing in them slices.
UNSLICED = frozenset(t for t in PICKUPABLE_TYPES if not t.endswith("Sliced"))


@dataclass(frozen=True)
class Receptacle:
    """A static receptacle instance: ALFRED id (``Type|x|y|z``), type and pose-derived location."""

    rid: str
    rtype: str
    location: str


@dataclass(frozen=True)
class Scene:
    """One floor plan: its receptacles (layout order) and the object types present."""

    number: int
    kind: str
    receptacles: tuple[Receptacle, ...]
    object_types: frozenset[str]


def receptacle_type(rid: str) -> str:
    """The type of an ALFRED receptacle id.

    Basins are parts of another object and carry their type last
    (``Sink|-01.90|+00.97|-01.50|SinkBasin``); ALFWorld's demangler names them
    ``sinkbasin 1`` from that shape. Every other id starts with its type.
    """
    parts = rid.split("|")
    return parts[-1] if len(parts) == 5 else parts[0]


def scene_kind(number: int) -> str:
    """``Kitchen``, ``LivingRoom``, ``Bedroom`` or ``Bathroom`` for a floor-plan number."""
    for kind, numbers in SCENE_KINDS.items():
        if number in numbers:
            return kind
    raise ValueError(f"FloorPlan{number} is not an ALFRED scene; scene numbers are 1-30, "
                     "201-230, 301-330 or 401-430")


def _location_name(pose: list[float]) -> str:
    # ALFWorld's location ids: grid x and z (0.25 m steps), rotation / 90, camera horizon.
    x, z, rotation, horizon = (round(pose[0] * 4), round(pose[1] * 4),
                               round(pose[2] / 90) % 4, round(pose[3]))
    return f"loc|{x}|{z}|{rotation}|{horizon}"


@cache
def load_scene(number: int) -> Scene:
    """Read ``FloorPlan{number}`` from the installed ``alfworld`` package."""
    layouts = resources.files("alfworld") / "gen" / "layouts"
    try:
        object_types = json.loads((layouts / f"FloorPlan{number}-objects.json").read_text())
        poses = json.loads((layouts / f"FloorPlan{number}-openable.json").read_text())
    except FileNotFoundError as err:
        raise FileNotFoundError(f"no layout for FloorPlan{number} in the alfworld package "
                                f"({layouts}): {err}") from err
    receptacles = []
    for rid in sorted(poses):
        rtype = receptacle_type(rid)
        if rtype in STATIC_RECEPTACLE_TYPES:
            receptacles.append(Receptacle(rid, rtype, _location_name(poses[rid])))
    present = {r.rtype for r in receptacles}
    for i, rtype in enumerate(sorted(set(object_types) & STATIC_RECEPTACLE_TYPES - present)):
        # Synthetic pose, distinct per added receptacle; location ids are never shown.
        pose = f"+{9 + i:02d}.00|+00.90|+09.00"
        basin = rtype.removesuffix("Basin")
        rid = f"{basin}|{pose}|{rtype}" if basin != rtype else f"{rtype}|{pose}"
        receptacles.append(Receptacle(rid, rtype, f"loc|{36 + 4 * i}|36|0|30"))
    return Scene(number, scene_kind(number), tuple(receptacles), frozenset(object_types))


def available_scenes(numbers: tuple[int, ...]) -> tuple[int, ...]:
    """The scene numbers among ``numbers`` whose layout files the package ships."""
    layouts = resources.files("alfworld") / "gen" / "layouts"
    return tuple(n for n in numbers if (layouts / f"FloorPlan{n}-openable.json").is_file())
