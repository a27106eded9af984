"""A partially-observable demonstrator for ALFWorld: search, then act on what was seen.

The planner's plan (``AlfWorldEnv.expert``) is computed on the full PDDL state,
so its first move goes straight to the receptacle that hides the target, which
nothing in the agent's observation reveals. A policy cloned from it learns to
guess. ``demonstrate`` plays the game knowing only what the agent knows:

- the room (the receptacles the first observation lists, in the order of the
  admissible ``go to`` actions), the task's types (target, goal receptacle,
  appliance, lamp) and which receptacle types can hold which object types
  (the game's ``receptacletype`` and ``cancontain`` facts: common sense the
  agent learns across games);
- objects only once an observation names them.

It searches the receptacles that can hold what it needs, going to each and
opening it when closed, never searching one twice (so it never visits a
receptacle twice before the target is seen). Receptacles of the goal type are
searched last, since a target already in place would make a trivial game.
Once an instance is seen it is taken; then the appliance (clean / heat /
cool), then a goal receptacle (opened when the move needs it).

Where several receptacles are equally good (the next one to search, which
instance of the appliance or goal type to use) it takes the first in list order,
or, given an ``rng``, one uniformly at random. The random tie-break is what a
small policy can imitate: "any receptacle not searched yet" is a set it can
read off the prompt, while "the first one in list order" asks it to find the
earliest of several lines, which a cloned tiny model gets wrong most of the
time. Every tie-break wins the same games. Look tasks then search for the lamp (or go
back to where one was seen) and switch it on; pick-two goes back to a second
instance it has seen, or resumes the search where it stopped.

Every action is chosen among the admissible ones, so a demonstration is a
valid episode; ``demonstrate`` returns None when the rules do not win the game
within ``max_steps`` (the caller then falls back to the planner).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from agentcredit.envs.alfworld.game_file import read_game_file
from agentcredit.envs.alfworld.tasks import TRANSFORMS
from agentcredit.envs.alfworld.verifier import read_game_facts
from agentcredit.envs.base import Task

#: the command verb of each transformation task.
_VERBS = {"pick_clean_then_place": "clean", "pick_heat_then_place": "heat",
          "pick_cool_then_place": "cool"}
_FACT = re.compile(r"^(\w+)\((.+)\)$")


@dataclass
class _Knowledge:
    """What the agent may know before it looks anywhere, and what it has seen since."""

    order: list[str]
    """Receptacles in the order of the first observation's ``go to`` actions."""
    rtype: dict[str, str]
    """Receptacle -> its type (``drawertype``)."""
    can_hold: set[tuple[str, str]]
    """(receptacle type, object type) pairs of the game's ``cancontain`` facts."""
    targets: tuple[str, ...]
    """Instances of the target type (recognised when an observation names them)."""
    lamps: tuple[str, ...]
    """Instances of the lamp type (look tasks)."""
    goal_type: str | None
    """Type of the receptacles the target goes to (None for look tasks)."""
    appliance_type: str | None
    """Type of the clean / heat / cool appliance (None for other tasks)."""
    verb: str | None = None
    """The transformation the task needs (``clean`` / ``heat`` / ``cool``; None for others)."""
    location: str | None = None
    """The receptacle last gone to (None in the middle of the room)."""
    searched: set[str] = field(default_factory=set)
    """Receptacles whose contents an observation has shown."""
    seen: dict[str, str] = field(default_factory=dict)
    """Target or lamp instance -> receptacle an observation last showed it in."""
    holding: str | None = None
    """The object in hand."""
    taken_from: str | None = None
    """The receptacle the object in hand was taken from."""
    placed: set[str] = field(default_factory=set)
    """Targets moved to a goal receptacle."""
    transformed: set[str] = field(default_factory=set)
    """Targets that have been cleaned / heated / cooled."""
    chosen: dict[str | None, str | None] = field(default_factory=dict)
    """Receptacle type -> the instance picked for it (appliance, goal), kept once picked."""
    rng: random.Random | None = None
    """Breaks ties between equally good receptacles at random; None: the first in list order."""


def _parse_facts(snapshot) -> dict[str, list[tuple[str, ...]]]:
    facts: dict[str, list[tuple[str, ...]]] = {}
    for text in snapshot:
        match = _FACT.match(text)
        if match:
            facts.setdefault(match[1], []).append(tuple(a.strip() for a in match[2].split(",")))
    return facts


def _knowledge(task: Task, snapshot, pddl_problem: str, admissible) -> _Knowledge:
    facts = _parse_facts(snapshot)
    game = read_game_facts(task.task_type, pddl_problem)
    rtype = {r: t for r, t in facts.get("receptacletype", [])}
    goal_types = {rtype[r] for r in game.goal_receptacles if r in rtype}
    appliance = TRANSFORMS.get(task.task_type, (None, None))[0]
    return _Knowledge(
        order=[a.removeprefix("go to ") for a in admissible if a.startswith("go to ")],
        rtype=rtype, can_hold={(r, o) for r, o in facts.get("cancontain", [])},
        targets=game.targets, lamps=game.lamps,
        goal_type=min(goal_types) if goal_types else None,
        appliance_type=f"{appliance.lower()}type" if appliance else None,
        verb=_VERBS.get(task.task_type))


def _mentioned(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text) is not None


def _pick(k: _Knowledge, candidates: list[str]) -> str | None:
    """The first of ``candidates`` (in list order), or a random one when ``k.rng`` is set."""
    if not candidates:
        return None
    return k.rng.choice(candidates) if k.rng is not None else candidates[0]


def _first_of_type(k: _Knowledge, rtype: str | None) -> str | None:
    """The receptacle of type ``rtype`` to use; the same one for the rest of the episode."""
    if rtype not in k.chosen:
        k.chosen[rtype] = _pick(k, [r for r in k.order if k.rtype.get(r) == rtype])
    return k.chosen[rtype]


def _here(k: _Knowledge, receptacle: str, admissible: set[str]) -> bool:
    """At ``receptacle``: went there, or it shares the location (its ``go to`` is missing)."""
    return k.location is not None and (
        k.location == receptacle or f"go to {receptacle}" not in admissible)


def _go_or(k: _Knowledge, receptacle: str, admissible: set[str], *commands: str) -> str | None:
    """Go to ``receptacle``; once there, the first admissible of ``commands``, else open it."""
    if not _here(k, receptacle, admissible):
        return f"go to {receptacle}"
    for command in commands:
        if command in admissible:
            return command
    return f"open {receptacle}" if f"open {receptacle}" in admissible else None


def _search(k: _Knowledge, otype: str | None, admissible: set[str]) -> str | None:
    """The next search move for an object of ``otype``: open here, or go to the next holder."""
    holders = [r for r in k.order
               if r not in k.searched and (k.rtype.get(r), otype) in k.can_hold]
    if not holders:  # the type facts missed it: search everything left
        holders = [r for r in k.order if r not in k.searched]
    if not holders:
        return None
    if k.location in holders and _here(k, k.location, admissible):  # finish searching here
        where = k.location
    else:
        others = [r for r in holders if k.rtype.get(r) != k.goal_type]
        where = _pick(k, others or holders)
    if not _here(k, where, admissible):
        return f"go to {where}"
    # a closed one is opened; a co-located one (its contents not shown on arrival) examined
    return f"open {where}" if f"open {where}" in admissible else f"examine {where}"


def _fetch(k: _Knowledge, names: tuple[str, ...], otype: str | None,
           admissible: set[str]) -> str | None:
    """Take a seen instance of ``names`` (going back to it if needed), else search on."""
    for name in names:
        where = k.seen.get(name)
        if where is not None and name not in k.placed:
            return _go_or(k, where, admissible, f"take {name} from {where}")
    return _search(k, otype, admissible)


def _put_down(k: _Knowledge, admissible: set[str]) -> str | None:
    """Put the held object down where the agent stands (opening it first), else go back to
    where it was taken from."""
    here = f"move {k.holding} to {k.location}"
    if here in admissible:
        return here
    if f"open {k.location}" in admissible:  # closed: it takes nothing yet
        return f"open {k.location}"
    if f"go to {k.taken_from}" in admissible:  # it cannot go here: back where it came from
        return f"go to {k.taken_from}"
    return next((a for a in sorted(admissible) if a.startswith(f"move {k.holding} to ")), None)


def next_action(k: _Knowledge, task_type: str, types: dict[str, str],
                 admissible: set[str]) -> str | None:
    """The demonstrator's command in the state ``k`` knows (``None``: it is stuck)."""
    target_type = types.get(k.targets[0]) if k.targets else None
    if task_type == "look_at_obj_in_light":
        if k.holding is None:
            return _fetch(k, k.targets, target_type, admissible)
        if k.holding not in k.targets:
            return _put_down(k, admissible)
        for lamp in k.lamps:
            if lamp in k.seen:
                return _go_or(k, k.seen[lamp], admissible, f"use {lamp}")
        return _search(k, types.get(k.lamps[0]) if k.lamps else None, admissible)
    if k.holding is None:
        return _fetch(k, k.targets, target_type, admissible)
    if k.holding not in k.targets:  # a wrong object in hand (a policy's step): put it down here
        return _put_down(k, admissible)
    if task_type in _VERBS and k.holding not in k.transformed:
        appliance = _first_of_type(k, k.appliance_type)
        if appliance is None:
            return None
        return _go_or(k, appliance, admissible,
                      f"{_VERBS[task_type]} {k.holding} with {appliance}")
    goal = _first_of_type(k, k.goal_type)
    return None if goal is None else _go_or(k, goal, admissible, f"move {k.holding} to {goal}")


def observe_step(k: _Knowledge, action: str, text: str, admissible: set[str]) -> None:
    """Update what the agent knows after ``action`` produced ``text``."""
    verb, _, rest = action.partition(" ")
    if verb == "take":
        k.holding, _, k.taken_from = rest.partition(" from ")
        k.seen.pop(k.holding, None)
        k.placed.discard(k.holding)
        return
    if verb == "move":
        destination = rest.split(" to ")[-1]
        ready = k.verb is None or k.holding in k.transformed  # placed too early counts for nothing
        if k.holding in k.targets and k.rtype.get(destination) == k.goal_type and ready:
            k.placed.add(k.holding)
            k.chosen.setdefault(k.goal_type, destination)  # the second of a pair goes there too
        elif k.holding in k.targets:  # put down elsewhere: fetched from there later
            k.seen[k.holding] = destination
        k.holding = None
        return
    if verb in _VERBS.values():
        if k.holding is not None and verb == k.verb:  # another kind does not do the task's
            k.transformed.add(k.holding)
        return
    if action.startswith("go to "):
        shown = k.location = action.removeprefix("go to ")
        if f"open {shown}" in admissible:  # closed: its contents are not shown yet
            return
    elif verb in ("open", "examine"):
        shown = rest
    else:
        return
    k.searched.add(shown)
    for name in k.targets + k.lamps:
        if name != k.holding and name not in k.placed and _mentioned(name, text):
            k.seen[name] = shown


def start_episode(env, task: Task, rng: random.Random | None):
    """Reset ``env`` on ``task``: the first observation, the knowledge before any look, and the
    object types."""
    obs = env.reset(task)
    snapshot = env.snapshot()
    problem = read_game_file(task.payload["game_file"])["pddl_problem"]
    k = _knowledge(task, snapshot, problem, obs.admissible_actions)
    k.rng = rng
    return obs, k, dict(_parse_facts(snapshot).get("objecttype", []))


#: commands a noisy step never takes: they change nothing (or only print help).
IDLE_COMMANDS = ("help", "look", "inventory")


def demonstrate(env, task: Task, max_steps: int = 60,
                rng: random.Random | None = None) -> list[str] | None:
    """Play ``task`` in ``env`` (an ``AlfWorldEnv``) with the search demonstrator.

    Resets ``env`` and leaves it in the final state. Returns the actions of a
    won episode, or None when the rules get stuck or exceed ``max_steps``.
    ``rng`` breaks ties between equally good receptacles (None: list order).
    """
    played = noisy_demonstration(env, task, rng, 0.0, max_steps)
    return None if played is None else played[0]


def noisy_demonstration(env, task: Task, rng: random.Random | None, noise: float,
                        max_steps: int = 60) -> tuple[list[str], list[str]] | None:
    """Play ``task`` with the demonstrator, taking a random command instead with prob. ``noise``.

    Returns ``(actions, labels)`` of a won episode: ``actions[t]`` is the command played at
    step t, ``labels[t]`` the one the demonstrator chose there (they differ at the noisy
    steps). After a noisy step the demonstrator carries on from wherever it led (a wrong
    object in hand is put down, a target put down elsewhere is fetched from there), so the
    labels teach a cloned policy to recover from the mistakes it will make, states the
    demonstrator's own episodes never reach. A noisy command is drawn uniformly from the
    admissible ones other than the label and ``help`` / ``look`` / ``inventory``. Returns
    None when the rules get stuck or the episode exceeds ``max_steps``; ``rng`` also
    breaks ties (``demonstrate``), and ``noise`` > 0 needs an ``rng``.
    """
    if noise > 0 and rng is None:
        raise ValueError(f"noisy_demonstration: noise={noise} needs an rng to draw from")

    obs, k, types = start_episode(env, task, rng)
    actions: list[str] = []
    labels: list[str] = []
    for _ in range(max_steps):
        admissible = set(obs.admissible_actions)
        label = next_action(k, task.task_type, types, admissible)
        if label is None or label not in admissible:
            return None
        action = label
        if noise > 0 and rng.random() < noise:
            others = sorted(a for a in admissible if a != label and a not in IDLE_COMMANDS)
            action = rng.choice(others) if others else label
        obs, _, _, info = env.step(action)
        actions.append(action)
        labels.append(label)
        if info.won:
            return actions, labels
        observe_step(k, action, obs.text, set(obs.admissible_actions))
    return None
