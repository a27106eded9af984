"""The ALFWorld verifier for VICT (docs/vict.md §4.1; VICT paper Table 10 and case study F.1).

States are the engine's snapshots: positive PDDL facts such as
``"inreceptacle(egg 1, countertop 1)": True``. Evidence is cumulative:
``seen:<entity>`` (named in an observation), ``held:<object>`` (the agent held it at some
point) and ``moved:<object>:<receptacle>`` (the agent put it there).

The atoms a core is made of are the facts the goal checks, as the VICT paper's case study
(appendix F.1) reads them: object identity (held), transformation and placement. Seeing a
target or a lamp is no atom of its own but evidence on the path to the atom it grounds (a
reveal edge), and walking to a receptacle is a support edge of the move it makes possible
(docs/vict.md §4.3). Placements count only when the agent made them (``moved:`` evidence
and the fact still true): a target that starts in a goal-type receptacle, as in official
games and in the paper's F.1 kitchen, is neither a placement at reset nor a penalty when
taken. Atoms (ids are stable across tasks; each task uses the ones it needs), as
``atom`` (role): status:

- ``object_held`` (prerequisite; hard for look): a target was held at some point, read from
  ``held:`` (look: is held now); bound to the target the agent placed (else the ones it
  held): its witnesses are the take (``holds`` turning true; a put-down writes nothing) and
  the observation that first named that target.
- ``transformation`` (hard): clean/heat/cool: the target the agent placed has the flag (or,
  with none placed, any target); bound to that target, so heating another one is no witness.
- ``light_toggled`` (hard): look: a toggled goal lamp stands where the agent is; seeing the
  lamp is evidence on its path.
- ``final_placement`` (hard): the agent moved a target into a goal-type receptacle and it lies
  there; bound to the agent's own moves into goal receptacles (and their take-backs).
- ``second_object`` (hard): pick two: one goal-type receptacle holds two targets.
- ``premature_placement`` (penalty): VIOL: the agent placed a target without the flag and
  none it placed has it; bound to the agent's placements and the flags of those targets.
- ``wrong_object_placed`` (penalty): VIOL: the agent put a non-target in a goal receptacle,
  it lies there and no target is placed; bound to that violating placement turning true, so
  taking a distractor off a goal receptacle (an undo) is not blamed.
- ``target_misplaced`` (penalty): VIOL: the agent put a target in a non-goal receptacle, it
  lies there at the end and no target is placed (VICT paper Table 14, row 3); bound to
  those placements turning true (not to taking a target from where it started).
- ``wrong_object_held`` (penalty): VIOL: the agent held a non-target, has never held a
  target and none is placed (VICT paper Table 14, row 1); bound to the wrong objects held,
  so its witnesses are the reveal and the violation of the first wrong take.

Irreversibility (``Atom.irreversible``; the paper's Table 9 flag, metadata for the audit
and the ledger): ``object_held`` (``held:``) reads lasting evidence, so no action undoes
it. Every other atom can be undone by an admissible action: a placement by taking the
object back, the heat or cool flag by the opposite transformation (``alfred.pddl``: heating
clears ``isCool``, cooling ``isHot``) or by placing another target it is then bound to,
holding (look) by putting the object down, the lit lamp by walking away, and each penalty
by the move that clears its condition (taking a target, placing a target).

Instrumentation level (``Atom.level``, the paper's appendix C): goal conjuncts of the PDDL
goal (``transformation``, ``final_placement``, ``second_object``, look's ``object_held`` and
``light_toggled``) are Level 0; atoms read off evidence that an adapter extracts from the
observations and the state history (``held:``, ``moved:``) are Level 2. No atom is Level 1:
ALFWorld's verifier is the goal test, with no branch or score term of its own.

Witness variables (``Atom.state_vars``, narrowed by ``Atom.binds`` on the terminal state)
are what can change an atom's status, plus the ``seen:`` evidence on its path
(docs/vict.md §4.3). ``moved:`` evidence always comes with the placement fact it names,
so the placement fact stands for it.

``F`` = 1 when every hard atom is SAT and no penalty atom is VIOL, else 0
(``verifier.aggregators.ConjunctiveAggregator``, plain data a trace carries).
Each penalty is defined so that its violation implies a hard atom is UNSAT, so
``F`` reproduces the engine's ``won`` exactly; ``V`` is the PDDL goal evaluated
in Python over a fact set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from alfworld.agents.utils.misc import Demangler

from agentcredit.envs.alfworld.tasks import TRANSFORMS, check_task_type
from agentcredit.envs.base import Task
from agentcredit.verifier.aggregators import ConjunctiveAggregator
from agentcredit.verifier.atoms import Atom, State, Status, Verifier
from agentcredit.verifier.trace import guarded

AGENT = "agent1"
_DECL = re.compile(r"^\s*(\S+) - (object|receptacle|location)\s*$", re.MULTILINE)
_FACT = re.compile(r"\((objecttype|receptacletype|receptacleatlocation) (\S+) (\S+)\)")
_GOAL_TYPE = re.compile(r"\((objecttype|receptacletype) \?(\w+) (\w+)type\)")
_MOVE = re.compile(r"You move the (.+?) to the (.+?)\.")
_ABLE = {"isclean": "cleanable", "ishot": "heatable", "iscool": "coolable"}


class _Entity:
    """Just enough of TextWorld's EntityInfo for ALFWorld's ``Demangler``."""

    def __init__(self, entity_id: str):
        self.id = entity_id


@dataclass(frozen=True)
class GameFacts:
    """What the verifier needs from a game file, in the engine's demangled names."""

    task_type: str
    targets: tuple[str, ...]
    goal_receptacles: tuple[str, ...]
    lamps: tuple[str, ...]
    other_objects: tuple[str, ...]
    other_receptacles: tuple[str, ...]
    location_of: Mapping[str, str]


def read_game_facts(task_type: str, pddl_problem: str) -> GameFacts:
    """Parse the entities of a ``pddl_problem`` and name them as the engine does."""
    problem = pddl_problem.lower()
    head, _, goal = problem.partition("(:goal")
    declared = _DECL.findall(head)
    names = Demangler(game_infos={i: _Entity(e) for i, (e, _) in enumerate(declared)})

    def name(entity: str) -> str:
        return names.demangle_alfred_name(entity).strip()

    kinds = {e: kind for e, kind in declared}
    otype, rtype, location_of = {}, {}, {}
    for pred, a, b in _FACT.findall(head):
        if pred == "objecttype" and kinds.get(a) == "object":
            otype[name(a)] = b.removesuffix("type")
        elif pred == "receptacletype" and kinds.get(a) == "receptacle":
            rtype[name(a)] = b.removesuffix("type")
        elif pred == "receptacleatlocation" and kinds.get(a) == "receptacle":
            location_of[name(a)] = name(b)
    goal_types = {var: t for _, var, t in _GOAL_TYPE.findall(goal)}
    obj = goal_types.get("o", goal_types.get("o1"))
    recep, toggle = goal_types.get("r"), goal_types.get("ot")
    if obj is None or (recep is None and toggle is None):
        raise ValueError(f"cannot read the goal object/receptacle types of a {task_type} game "
                         f"from its PDDL goal: {goal.strip()[:200]!r}")
    targets = tuple(sorted(o for o, t in otype.items() if t == obj))
    lamps = tuple(sorted(o for o, t in otype.items() if toggle and t == toggle))
    goal_receps = tuple(sorted(r for r, t in rtype.items() if t == recep))
    return GameFacts(
        task_type=task_type, targets=targets, goal_receptacles=goal_receps, lamps=lamps,
        other_objects=tuple(sorted(set(otype) - set(targets) - set(lamps))),
        other_receptacles=tuple(sorted(set(rtype) - set(goal_receps))),
        location_of=location_of)


# STATE QUERIES (a state is a mapping whose keys are the true facts)

def _inr(o: str, r: str) -> str:
    return f"inreceptacle({o}, {r})"


def _placed(g: GameFacts, state: State) -> list[tuple[str, str]]:
    return [(o, r) for o in g.targets for r in g.goal_receptacles if _inr(o, r) in state]


def original_score(g: GameFacts, state: State) -> float:
    """``V``: the task's PDDL goal (``alfworld.gen.goal_library``) evaluated on a fact set."""
    if g.task_type == "look_at_obj_in_light":
        held = any(f"holds({AGENT}, {o})" in state for o in g.targets)
        return float(_lamp_lit(g, state) and held)
    placed = _placed(g, state)
    if g.task_type in TRANSFORMS:
        flag = TRANSFORMS[g.task_type][1]
        return float(any(f"{flag}({o})" in state and f"{_ABLE[flag]}({o})" in state
                         for o, _ in placed))
    if g.task_type == "pick_two_obj_and_place":
        per_recep = [r for _, r in placed]
        return float(any(per_recep.count(r) >= 2 for r in set(per_recep)))
    return float(bool(placed))


def _lamp_lit(g: GameFacts, state: State) -> bool:
    """Look tasks: a toggled goal lamp stands in a receptacle at the agent's location."""
    return any(f"istoggled({lamp})" in state and f"toggleable({lamp})" in state
               and _inr(lamp, r) in state and f"atlocation({AGENT}, {loc})" in state
               for lamp in g.lamps for r, loc in g.location_of.items())


# ATOMS

def _status(ok: bool) -> Status:
    return Status.SAT if ok else Status.UNSAT


def _moved_in(g: GameFacts, e: Any, objects: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(o, r)`` the agent itself moved into a goal receptacle (``moved:`` evidence), whether or
    not ``o`` is still there."""
    return [(o, r) for o in objects for r in g.goal_receptacles if f"moved:{o}:{r}" in e]


def _agent_placed(g: GameFacts, s: State, e: Any) -> list[tuple[str, str]]:
    """Targets the agent moved into a goal receptacle that lie there now: a target that starts
    in a goal-type receptacle (official games have such starts) is not a placement."""
    return [(o, r) for o, r in _moved_in(g, e, g.targets) if _inr(o, r) in s]


def _held_guarded(o: str) -> str:
    """The witness key of taking ``o``: ``holds(agent1, o)`` changed and is true after the step,
    so a put-down writes nothing to "held"."""
    held = f"holds({AGENT}, {o})"
    return guarded(held, held, True)


def _arrived(fact: str) -> str:
    """The witness key of a placement ``fact`` turning true: taking the object from where it
    started there writes nothing."""
    return guarded(fact, fact, True)


def _atoms(g: GameFacts) -> tuple[Atom, ...]:
    """The atoms of one game, in the verifier's order (module docstring): look's three, else
    the held prerequisite, the transformation pair, the placement, pick-two's second object
    and the three placement penalties, then ``wrong_object_held``."""
    placement_vars = tuple(_inr(o, r) for o in g.targets for r in g.goal_receptacles)
    seen_vars = tuple(f"seen:{o}" for o in g.targets)
    if g.task_type == "look_at_obj_in_light":
        return _look_atoms(g, seen_vars)
    atoms = [_object_held(g, seen_vars)]
    placement_parents: tuple[str, ...] = ("object_held",)
    if g.task_type in TRANSFORMS:
        atoms += _transformation_atoms(g, placement_vars)
        placement_parents += ("transformation",)
    atoms.append(Atom("final_placement", lambda s, e: _status(bool(_agent_placed(g, s, e))),
                      "online", placement_parents, placement_vars, "hard",
                      audit_source="goal: (inReceptacle ?o ?r) with the goal types, by the "
                                   "agent's own move",
                      binds=lambda s, e: tuple(_inr(o, r)
                                               for o, r in _moved_in(g, e, g.targets)),
                      level=0))
    if g.task_type == "pick_two_obj_and_place":
        atoms.append(Atom("second_object", lambda s, e: _status(original_score(g, s) == 1.0),
                          "online", ("final_placement",), placement_vars, "hard",
                          audit_source="goal: two distinct targets in one goal receptacle",
                          level=0))
    atoms.append(_wrong_object_placed(g, placement_vars))
    atoms.append(_target_misplaced(g, placement_vars))
    atoms.append(_wrong_object_held(g))
    return tuple(atoms)


def _look_atoms(g: GameFacts, seen_vars: tuple[str, ...]) -> tuple[Atom, ...]:
    """Look's atoms: ``object_held`` (a target in hand now), ``light_toggled`` and
    ``wrong_object_held``; ``seen_vars`` are the targets' ``seen:`` keys."""
    held_vars = tuple(f"holds({AGENT}, {o})" for o in g.targets)
    lamp_host_vars = tuple(f"atlocation({AGENT}, {g.location_of[r]})"
                           for r in sorted(g.location_of))
    return (
        Atom("object_held", lambda s, e: _status(any(v in s for v in held_vars)), "online",
             (), held_vars + seen_vars, "hard",
             audit_source="goal: (holds ?a ?o) with (objectType ?o target); seeing a target "
                          "is evidence on its path", level=0),
        Atom("light_toggled",
             lambda s, e: _status(_lamp_lit(g, s)), "online", (),
             tuple(f"istoggled({x})" for x in g.lamps) + lamp_host_vars
             + tuple(f"seen:{x}" for x in g.lamps), "hard",
             audit_source="goal: toggled lamp in a receptacle at the agent's location; "
                          "seeing the lamp is evidence on its path", level=0),
        _wrong_object_held(g),
    )


def _object_held(g: GameFacts, seen_vars: tuple[str, ...]) -> Atom:
    """The placing tasks' prerequisite: a target was held at some point (``held:``), bound to
    the target the agent placed (else the ones it held, else all): its witnesses are the take
    and the observation that first named that target."""

    def bound_targets(s: State, e: Any) -> tuple[str, ...]:
        placed = [o for o, _ in _agent_placed(g, s, e)]
        held = [o for o in g.targets if f"held:{o}" in e]
        return tuple(placed or held or g.targets)

    return Atom("object_held", lambda s, e: _status(any(f"held:{o}" in e for o in g.targets)),
                "online", (), tuple(_held_guarded(o) for o in g.targets) + seen_vars,
                "prerequisite",
                audit_source="inventory held a target instance; seeing one is evidence on its "
                             "path",
                binds=lambda s, e: tuple(k for o in bound_targets(s, e)
                                         for k in (_held_guarded(o), f"seen:{o}")),
                irreversible=True, level=2)


def _transformation_atoms(g: GameFacts, placement_vars: tuple[str, ...]) -> list[Atom]:
    """Clean/heat/cool: ``transformation`` (the placed target, else any, has the flag) and
    ``premature_placement`` (VIOL: placed targets, none with the flag), both bound to the
    agent's placements."""
    flag = TRANSFORMS[g.task_type][1]
    flag_vars = tuple(f"{flag}({o})" for o in g.targets)

    def pool(s: State, e: Any) -> list[str]:
        placed = _agent_placed(g, s, e)
        return [o for o, _ in placed] if placed else list(g.targets)

    def transformed(s: State, e: Any) -> Status:
        return _status(any(f"{flag}({o})" in s for o in pool(s, e)))

    def flags_of_bound(s: State, e: Any) -> tuple[str, ...]:
        return tuple(f"{flag}({o})" for o in pool(s, e))

    def premature_reads(s: State, e: Any) -> tuple[str, ...]:
        moved = _moved_in(g, e, g.targets)
        return (tuple(_inr(o, r) for o, r in moved)
                + tuple(dict.fromkeys(f"{flag}({o})" for o, _ in moved)))

    def premature(s: State, e: Any) -> Status:
        placed = _agent_placed(g, s, e)
        bad = bool(placed) and not any(f"{flag}({o})" in s for o, _ in placed)
        return Status.VIOL if bad else Status.UNSAT

    return [
        Atom("transformation", transformed, "online", ("object_held",), flag_vars, "hard",
             audit_source=f"goal: ({flag} ?o) on the placed target",
             binds=flags_of_bound, level=0),
        Atom("premature_placement", premature, "online", ("object_held",),
             placement_vars + flag_vars, "penalty",
             audit_source=f"target placed in the goal receptacle without {flag}",
             binds=premature_reads, level=2),
    ]


def _wrong_object_placed(g: GameFacts, placement_vars: tuple[str, ...]) -> Atom:
    """VIOL: the agent put a non-target in a goal receptacle, it lies there and no target is
    placed; bound to that placement turning true, so taking a distractor off is no blame."""

    def wrong_placements(s: State, e: Any) -> tuple[str, ...]:
        return tuple(_inr(o, r) for o, r in _moved_in(g, e, g.other_objects) if _inr(o, r) in s)

    def wrong_placement_keys(s: State, e: Any) -> tuple[str, ...]:
        return tuple(_arrived(fact) for fact in wrong_placements(s, e))

    def wrong_object(s: State, e: Any) -> Status:
        wrong = wrong_placements(s, e) and not _agent_placed(g, s, e)
        return Status.VIOL if wrong else Status.UNSAT

    return Atom("wrong_object_placed", wrong_object, "online", (),
                tuple(_inr(o, r) for o in g.other_objects for r in g.goal_receptacles)
                + placement_vars,
                "penalty", audit_source="a non-target put in a goal receptacle",
                binds=wrong_placement_keys, level=2)


def _target_misplaced(g: GameFacts, placement_vars: tuple[str, ...]) -> Atom:
    """VIOL: the agent put a target in a non-goal receptacle, it lies there and no target is
    placed (VICT paper Table 14, row 3); bound to those placements turning true and the
    agent's moves into goal receptacles."""

    def misplaced_facts(s: State, e: Any) -> tuple[str, ...]:
        return tuple(_inr(o, r) for o in g.targets for r in g.other_receptacles
                     if f"moved:{o}:{r}" in e and _inr(o, r) in s)

    def misplaced(s: State, e: Any) -> Status:
        bad = misplaced_facts(s, e) and not _agent_placed(g, s, e)
        return Status.VIOL if bad else Status.UNSAT

    return Atom("target_misplaced", misplaced, "online", ("object_held",),
                tuple(_inr(o, r) for o in g.targets for r in g.other_receptacles)
                + placement_vars, "penalty",
                audit_source="the agent put a target in a non-goal receptacle and none is "
                             "in a goal receptacle",
                binds=lambda s, e: tuple(_arrived(f) for f in misplaced_facts(s, e))
                + tuple(_inr(o, r) for o, r in _moved_in(g, e, g.targets)), level=2)

def _wrong_object_held(g: GameFacts) -> Atom:
    """VIOL: the agent held a non-target, never a target, and no target is placed (VICT paper
    Table 14, row 1: "takes potato 1 from the fridge"). Violation implies the goal is unmet
    (no target held means none placed and none in hand), so ``F`` still reproduces ``V``.
    Bound to the wrong objects held: its witnesses are the reveal and the violation of the
    wrong take."""
    wrong_vars = tuple(f"held:{o}" for o in g.other_objects)
    target_vars = tuple(f"held:{o}" for o in g.targets)

    def wrong_held(s: State, e: Any) -> Status:
        wrong = any(v in e for v in wrong_vars)
        target = any(v in e for v in target_vars) or _agent_placed(g, s, e)
        return Status.VIOL if wrong and not target else Status.UNSAT

    return Atom("wrong_object_held", wrong_held, "online", (),
                wrong_vars + target_vars + tuple(_inr(o, r) for o in g.targets
                                                 for r in g.goal_receptacles), "penalty",
                audit_source="a non-target held and no target ever held",
                binds=lambda s, e: tuple(v for v in wrong_vars if v in e), level=2)


# EVIDENCE, COMMITS, MUTATIONS

def _evidence_extractor(g: GameFacts):
    entities = g.targets + g.lamps + g.other_objects + g.goal_receptacles + g.other_receptacles
    patterns = [(x, re.compile(rf"(?<![\w]){re.escape(x)}(?![\w])")) for x in entities]

    def extract(text: str, state: State) -> dict[str, Any]:
        found: dict[str, Any] = {f"seen:{x}": True for x, pat in patterns if pat.search(text)}
        found |= {f"held:{o}": True for o in g.targets + g.other_objects
                  if f"holds({AGENT}, {o})" in state}
        found |= {f"moved:{o}:{r}": True for o, r in _MOVE.findall(text)}
        return found

    return extract


def _relocate(state: State, obj: str, dest: str) -> dict[str, Any]:
    out = {k: v for k, v in state.items()
           if not (k.startswith(f"inreceptacle({obj}, ") or k == f"holds({AGENT}, {obj})")}
    out[_inr(obj, dest)] = True
    return out


def _mutations(g: GameFacts) -> dict[str, Any]:
    wrong_home = g.other_receptacles[0] if g.other_receptacles else None
    mutations: dict[str, Any] = {}

    def final_objects(s: State) -> list[str]:
        if g.task_type == "look_at_obj_in_light":
            return [o for o in g.targets if f"holds({AGENT}, {o})" in s]
        return [o for o, _ in _placed(g, s)]

    if wrong_home:
        def wrong_receptacle(s: State, e: Any):
            for o in final_objects(s):
                s = _relocate(s, o, wrong_home)
            return s, e
        mutations["wrong_receptacle"] = wrong_receptacle

    flag = TRANSFORMS.get(g.task_type, (None, "istoggled"))[1]
    if g.task_type in TRANSFORMS or g.task_type == "look_at_obj_in_light":
        def clear_transformation(s: State, e: Any):
            return {k: v for k, v in s.items() if not k.startswith(f"{flag}(")}, e
        mutations["clear_transformation"] = clear_transformation

    if g.other_objects:
        def swap_target(s: State, e: Any):
            # The stand-in is a non-target that sits outside every goal receptacle.
            outside = [x for x in g.other_objects
                       if any(_inr(x, r) in s for r in g.other_receptacles)]
            if not outside:
                return s, e
            stand_in = outside[0]
            for o in final_objects(s):
                spot = [k for k in s if k.startswith(f"inreceptacle({o}, ")
                        or k == f"holds({AGENT}, {o})"]
                away = [k for k in s if k.startswith(f"inreceptacle({stand_in}, ")]
                s = {k: v for k, v in s.items() if k not in spot and k not in away}
                s.update({k.replace(o, stand_in, 1) if k.startswith("inreceptacle") else
                          k.replace(o, stand_in): True for k in spot})
                s.update({k.replace(stand_in, o, 1): True for k in away})
            return s, e
        mutations["swap_target"] = swap_target

    if g.task_type == "pick_two_obj_and_place" and wrong_home:
        def drop_second(s: State, e: Any):
            placed = final_objects(s)
            return (_relocate(s, placed[-1], wrong_home) if placed else s), e
        mutations["drop_second"] = drop_second
    return mutations


def build_verifier(task: Task, game: Mapping[str, Any]) -> Verifier:
    """The VICT verifier of one ALFWorld game (``game`` = the parsed ``game.tw-pddl``)."""
    g = read_game_facts(check_task_type(task.task_type), game["pddl_problem"])
    atoms = _atoms(g)
    goal_receps = set(g.goal_receptacles)
    if g.task_type == "look_at_obj_in_light":
        def is_commit(action: str) -> bool:
            return any(action.strip() == f"use {lamp}" for lamp in g.lamps)
        scope = ("light_toggled", "object_held")
    else:
        def is_commit(action: str) -> bool:
            match = re.fullmatch(r"move (.+) to (.+)", action.strip())
            return bool(match) and match.group(2) in goal_receps
        scope = tuple(a.atom_id for a in atoms
                      if a.atom_id in {"final_placement", "transformation", "second_object",
                                       "premature_placement", "wrong_object_placed"})
    return Verifier(
        task_id=task.task_id, atoms=atoms, aggregate=ConjunctiveAggregator.from_atoms(atoms),
        original=lambda state: original_score(g, state),
        is_commit=is_commit,
        commit_scope=lambda action: scope if is_commit(action) else (),
        extract_evidence=_evidence_extractor(g),
        mutations=_mutations(g),
        env="alfworld",
    )
