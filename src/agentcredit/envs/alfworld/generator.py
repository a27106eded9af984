"""Generate real ALFWorld games offline from the layouts the ``alfworld`` package ships.

A game is a ``game.tw-pddl`` file (JSON: ``pddl_domain``, ``grammar``,
``pddl_problem``, ``solvable``, ``walkthrough``) in the format of the official
ALFWorld games, plus a small ``meta.json``. Each game is sampled from one
floor plan: object instances are placed under ALFRED's ``canContain`` rules,
receptacles the layouts omit are added (``scenes.load_scene``), games whose goal
holds at the start are rejected, and only games the Fast Downward planner solves
are kept; the plan is stored as the walkthrough.

Splits are disjoint by construction: ``train`` and ``valid_seen`` draw from the
training floor plans with different random streams (and a ``valid_seen`` game
whose initial state equals a ``train`` game's is rejected by the tests'
signature check), ``valid_unseen`` draws only from the held-out floor plans.
Generated games are not the official ALFWorld splits; results on them are not
comparable with published numbers.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import random
import tempfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from agentcredit.disk_full import writing
from agentcredit.envs.alfworld import scenes
from agentcredit.envs.alfworld.options import GeneratorConfig
from agentcredit.envs.alfworld.scenes import Receptacle, Scene
from agentcredit.envs.alfworld.tasks import (
    TASK_TYPES,
    TRANSFORMS,
    check_task_type,
    goal_pddl,
    goal_sentence,
    mangle,
    scene_kinds_for,
)
from agentcredit.envs.base import Task
from agentcredit.progress import track

SPLITS = ("train", "valid_seen", "valid_unseen")
GENERATOR_VERSION = 2
#: receptacle types that can carry a desk or floor lamp in a look task.
LAMP_HOSTS = frozenset({"Desk", "SideTable", "Dresser", "Shelf", "CoffeeTable", "DiningTable",
                        "TVStand"})
_SPLIT_STREAM = {"train": 0, "valid_seen": 1, "valid_unseen": 2}


@dataclass(frozen=True)
class GameSpec:
    """A sampled game before it is written: everything ``problem_text`` needs."""

    task_type: str
    scene: int
    receptacles: tuple[Receptacle, ...]
    objects: tuple[tuple[str, str], ...]  # (alfred object id, receptacle id it starts in)
    obj: str
    recep: str
    toggle: str
    sentence: str


def _instance_id(otype: str, rng: random.Random) -> str:
    coords = [rng.uniform(-3.0, 3.0) for _ in range(3)]
    return otype + "".join(f"|{c:+06.2f}" for c in coords)


def _pick_rooms(scene: Scene, required: list[Receptacle], cap: int | None,
                rng: random.Random) -> tuple[Receptacle, ...]:
    if cap is None or len(scene.receptacles) <= cap:
        return scene.receptacles
    rest = [r for r in scene.receptacles if r not in required]
    keep = set(required) | set(rng.sample(rest, max(0, cap - len(required))))
    return tuple(r for r in scene.receptacles if r in keep)


def sample_game(task_type: str, scene: Scene, config: GeneratorConfig,
                rng: random.Random) -> GameSpec | None:
    """One candidate game on ``scene``, or None when the scene cannot host the task."""
    present = scene.object_types
    types_here = {r.rtype for r in scene.receptacles}
    appliance = TRANSFORMS.get(task_type, (None, None))[0]
    if appliance and appliance not in types_here:
        return None
    candidates = sorted(scenes.UNSLICED & present)
    if task_type in TRANSFORMS:
        flag_types = {"pick_clean_then_place": scenes.CLEANABLE,
                      "pick_heat_then_place": scenes.HEATABLE,
                      "pick_cool_then_place": scenes.COOLABLE}[task_type]
        candidates = [t for t in candidates if t in flag_types]
    if not candidates:
        return None
    obj = rng.choice(candidates)
    holders = [r for r in scene.receptacles if obj in scenes.CAN_CONTAIN[r.rtype]]
    toggle, recep, required = "", "", []
    if task_type == "look_at_obj_in_light":
        lamps = sorted(scenes.TOGGLEABLE & present)
        hosts = [r for r in scene.receptacles if r.rtype in LAMP_HOSTS]
        if not lamps or not hosts or not holders:
            return None
        toggle = rng.choice(lamps)
        lamp_host = rng.choice(hosts)
        required = [lamp_host, rng.choice(holders)]
    else:
        goal_types = sorted({r.rtype for r in holders} - {appliance})
        if not goal_types:
            return None
        recep = rng.choice(goal_types)
        start_holders = [r for r in holders if r.rtype != recep]
        if not start_holders:
            return None
        required = [rng.choice([r for r in holders if r.rtype == recep]),
                    rng.choice(start_holders)]
        if appliance:
            required.append(rng.choice([r for r in scene.receptacles if r.rtype == appliance]))
    room = _pick_rooms(scene, required, config.max_receptacles, rng)

    objects: list[tuple[str, str]] = []
    if toggle:
        objects.append((_instance_id(toggle, rng), required[0].rid))
    n_targets = rng.randint(2, 3) if task_type == "pick_two_obj_and_place" else rng.randint(1, 3)
    target_homes = [r for r in room if obj in scenes.CAN_CONTAIN[r.rtype] and r.rtype != recep]
    if not target_homes:
        return None
    for _ in range(n_targets):
        objects.append((_instance_id(obj, rng), rng.choice(target_homes).rid))
    distractors = sorted(scenes.PICKUPABLE_TYPES & present - {obj})
    for otype in rng.sample(distractors, min(len(distractors), config.max_distractor_types)):
        homes = [r for r in room if otype in scenes.CAN_CONTAIN[r.rtype]]
        for _ in range(rng.randint(1, 2) if homes else 0):
            objects.append((_instance_id(otype, rng), rng.choice(homes).rid))
    sentence = goal_sentence(task_type, rng.randrange(2), obj, recep, toggle)
    return GameSpec(task_type, scene.number, room, tuple(objects), obj, recep, toggle, sentence)


def problem_text(spec: GameSpec, name: str) -> str:
    """The PDDL problem of ``spec`` in ALFWorld's mangled naming."""
    locations = sorted({r.location for r in spec.receptacles}) + ["loc|start"]
    rtypes = sorted({r.rtype for r in spec.receptacles} | ({spec.recep} if spec.recep else set()))
    otypes = sorted({oid.split("|", 1)[0] for oid, _ in spec.objects} | {spec.obj})
    where = {r.rid: r for r in spec.receptacles}
    decl = ["agent1 - agent"]
    decl += [f"{mangle(loc)} - location" for loc in locations]
    decl += [f"{mangle(r.rid)} - receptacle" for r in spec.receptacles]
    decl += [f"{mangle(oid)} - object" for oid, _ in spec.objects]
    decl += [f"{t}Type - rtype" for t in rtypes] + [f"{t}Type - otype" for t in otypes]
    init = ["(= (total-cost) 0)", f"(atLocation agent1 {mangle('loc|start')})"]
    for r in spec.receptacles:
        init += [f"(receptacleType {mangle(r.rid)} {r.rtype}Type)",
                 f"(receptacleAtLocation {mangle(r.rid)} {mangle(r.location)})"]
        if r.rtype in scenes.OPENABLE_TYPES:
            init.append(f"(openable {mangle(r.rid)})")
    for oid, rid in spec.objects:
        otype, o = oid.split("|", 1)[0], mangle(oid)
        init += [f"(objectType {o} {otype}Type)", f"(inReceptacle {o} {mangle(rid)})",
                 f"(objectAtLocation {o} {mangle(where[rid].location)})"]
        flags = [("pickupable", otype in scenes.PICKUPABLE_TYPES),
                 ("cleanable", otype in scenes.CLEANABLE), ("heatable", otype in scenes.HEATABLE),
                 ("coolable", otype in scenes.COOLABLE), ("toggleable", otype in scenes.TOGGLEABLE),
                 ("isReceptacleObject", otype in scenes.MOVABLE_RECEPTACLES)]
        init += [f"({flag} {o})" for flag, on in flags if on]
    for rt in rtypes:
        init += [f"(canContain {rt}Type {ot}Type)" for ot in otypes
                 if ot in scenes.CAN_CONTAIN.get(rt, ())]
    indent = "\n        "
    return (f"(define (problem {name})\n    (:domain alfred)\n    (:objects{indent}"
            f"{indent.join(decl)}\n    )\n    (:init{indent}{indent.join(init)}\n    )\n"
            f"{goal_pddl(spec.task_type, spec.obj, spec.recep, spec.toggle)}")


def _alfworld_text(name: str) -> str:
    return (resources.files("alfworld") / "data" / name).read_text()


def game_json(spec: GameSpec, name: str) -> dict:
    """The ``game.tw-pddl`` content for ``spec`` (without the walkthrough yet)."""
    return {
        "pddl_domain": _alfworld_text("alfred.pddl"),
        "grammar": _alfworld_text("alfred.twl2").replace("UNKNOWN GOAL", spec.sentence),
        "pddl_problem": problem_text(spec, name),
        "solvable": False,
        "walkthrough": [],
    }


def _scenes_for(split: str, task_type: str) -> list[Scene]:
    numbers = scenes.HELD_OUT_SCENES if split == "valid_unseen" else scenes.TRAIN_SCENES
    kinds = scene_kinds_for(task_type)
    return [scenes.load_scene(n) for n in scenes.available_scenes(numbers)
            if scenes.scene_kind(n) in kinds]


def _config_key(config: GeneratorConfig) -> str:
    blob = json.dumps({"version": GENERATOR_VERSION, **asdict(config)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _game_dir(split: str, task_type: str, index: int, config: GeneratorConfig,
              cache_dir: Path) -> Path:
    return (Path(cache_dir) / _config_key(config) / split / task_type
            / f"{split}-{task_type}-{index:05d}")


def generate_game(split: str, task_type: str, index: int, config: GeneratorConfig,
                  cache_dir: Path) -> Task:
    """Generate (or load from ``cache_dir``) game ``index`` of ``split`` and ``task_type``.

    Deterministic: the same arguments give the same file content. Raises
    RuntimeError when no solvable game is found within ``config.max_attempts``.
    """
    from agentcredit.envs.alfworld.engine import plan_game

    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    check_task_type(task_type)
    game_id = f"{split}-{task_type}-{index:05d}"
    game_dir = _game_dir(split, task_type, index, config, cache_dir)
    meta_path = game_dir / "meta.json"
    if meta_path.is_file():
        return task_from_meta(json.loads(meta_path.read_text()), game_dir)
    seed_text = f"{config.seed}/{_SPLIT_STREAM[split]}/{task_type}/{index}"
    rng = random.Random(hashlib.sha256(seed_text.encode()).hexdigest())
    pool = _scenes_for(split, task_type)
    for _ in range(config.max_attempts):
        spec = sample_game(task_type, rng.choice(pool), config, rng)
        if spec is None:
            continue
        game = game_json(spec, game_id)
        plan = plan_game(game)
        if plan is None or not 0 < len(plan) <= config.max_plan_length:
            continue
        game.update(solvable=True, walkthrough=plan)
        game_dir.mkdir(parents=True, exist_ok=True)
        _write_atomic(game_dir / "game.tw-pddl", json.dumps(game))
        meta = {"game_id": game_id, "split": split, "task_type": task_type,
                "instruction": spec.sentence, "scene": spec.scene,
                "receptacles": len(spec.receptacles), "plan_length": len(plan),
                "generator_version": GENERATOR_VERSION, "config": asdict(config)}
        _write_atomic(meta_path, json.dumps(meta, indent=1))
        return task_from_meta(meta, game_dir)
    raise RuntimeError(f"no solvable {task_type} game for {split} #{index} after "
                       f"{config.max_attempts} attempts; raise max_attempts or max_receptacles")


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file of this writer's own.

    Two runs that share the cache may generate the same game at once: each renames its own
    file into place (a game's content is a pure function of its arguments, so either rename
    leaves the same file), and neither can rename the other's away.
    """
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with writing(path), os.fdopen(handle, "w") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def task_from_meta(meta: dict, game_dir: Path) -> Task:
    """The ``Task`` record of a generated game."""
    return Task(task_id=meta["game_id"], env="alfworld", split=meta["split"],
                instruction=meta["instruction"], task_type=meta["task_type"],
                payload={"game_file": str(game_dir / "game.tw-pddl"), "scene": meta["scene"],
                         "receptacles": meta["receptacles"]})


def cache_folder(config: GeneratorConfig, cache_dir: Path) -> Path:
    """The folder of ``cache_dir`` that holds the games of ``config``."""
    return Path(cache_dir) / _config_key(config)


def missing_games(split: str, games_per_type: int, config: GeneratorConfig, cache_dir: Path,
                  task_types: tuple[str, ...] = tuple(TASK_TYPES)) -> list[tuple[str, int]]:
    """``(task type, index)`` of the games of ``split`` not yet in ``cache_dir``."""
    return [(t, i) for t in task_types for i in range(games_per_type)
            if not (_game_dir(split, t, i, config, cache_dir) / "meta.json").is_file()]


def generate_split(split: str, games_per_type: int, config: GeneratorConfig, cache_dir: Path,
                   task_types: tuple[str, ...] = tuple(TASK_TYPES),
                   workers: int | None = None) -> list[Task]:
    """``games_per_type`` games of every task type in ``task_types``, in a fixed order.

    Games missing from the cache are generated by ``workers`` processes at once
    (``None``: one per CPU core, at most 8; this process alone when it is a daemon, such as a
    ``multiprocessing.Pool`` worker, which may start no process); a game is a pure function of its
    arguments, so the result does not depend on ``workers``. Shows a
    ``{split} games`` progress bar inside ``progress.reporting(True)`` (a run with
    ``run.progress``); loading cached games ends before the bar's delay, so it stays quiet.
    """
    wanted = [(t, i) for t in task_types for i in range(games_per_type)]
    if workers is None:
        workers = 1 if multiprocessing.current_process().daemon else min(os.cpu_count() or 1, 8)
    missing = missing_games(split, games_per_type, config, cache_dir, task_types)
    if workers > 1 and len(missing) > 1:
        context = multiprocessing.get_context("spawn")  # the parent may hold torch's threads
        with ProcessPoolExecutor(min(workers, len(missing)), mp_context=context) as pool:
            jobs = [pool.submit(generate_game, split, t, i, config, cache_dir)
                    for t, i in missing]
            for job in track(as_completed(jobs), f"{split} games", total=len(jobs),
                             unit="games"):
                job.result()
    return [generate_game(split, t, i, config, cache_dir)
            for t, i in track(wanted, f"{split} games", unit="games")]
