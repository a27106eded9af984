"""The VICT paper's ALFWorld case study (appendix F.1) as a real generated game.

"Heat some egg and put it in countertop": a kitchen from FloorPlan4 with two
countertops, the second holding three eggs (so the eggs start on the goal type, as in
the paper's trace and in official games), a fridge holding a potato, a bowl and a plate,
a microwave, a sink and a cabinet. Rollouts are played on the
real ALFWorld engine and traced through its verifier.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import torch

from agentcredit.credit import CreditBatch
from agentcredit.verifier.trace import RolloutTrace

from ...played import played_states

pytest.importorskip("alfworld")

OUTCOME_REWARD = 10.0  # docs/backbones.md §2: ALFWorld 10·1[won]

@dataclass(frozen=True)
class CaseStudy:
    """The rollouts of the case study (VICT paper, Tables 13 and 14), the eggs on countertop 2
    as in the paper's kitchen (a countertop is also the goal type).

    ``success``: Table 13. The near misses of Table 14: ``wrong_take`` (row 1, takes the potato
    after failing to find an egg), ``premature`` (row 2, moves the egg before heating it),
    ``sink`` (row 3, heats it, then puts it in the sink basin), ``looping`` (row 4, loops on
    look and container openings after the egg is held). ``wandering``: rollouts that never
    find the egg. ``failures``: every failure, in the order a group of ``k`` successes takes
    its ``8 − k`` failures from (``group``)."""

    success: tuple[str, ...] = (
        "go to fridge 1", "open fridge 1", "go to countertop 2", "take egg 1 from countertop 2",
        "go to microwave 1", "open microwave 1", "heat egg 1 with microwave 1",
        "go to countertop 1", "move egg 1 to countertop 1")
    wrong_take: tuple[str, ...] = (
        "go to fridge 1", "open fridge 1", "take potato 1 from fridge 1", "look")
    premature: tuple[str, ...] = (
        "go to countertop 2", "take egg 1 from countertop 2", "go to countertop 1",
        "move egg 1 to countertop 1", "look")
    sink: tuple[str, ...] = (
        "go to countertop 2", "take egg 1 from countertop 2", "go to microwave 1",
        "heat egg 1 with microwave 1", "go to sinkbasin 1", "move egg 1 to sinkbasin 1")
    looping: tuple[str, ...] = (
        "go to countertop 2", "take egg 2 from countertop 2", "look", "go to cabinet 1",
        "open cabinet 1", "close cabinet 1", "open cabinet 1", "look")
    wandering: tuple[tuple[str, ...], ...] = (
        ("go to microwave 1", "open microwave 1", "close microwave 1", "look"),
        ("go to fridge 1", "open fridge 1", "close fridge 1", "go to cabinet 1"),
        ("go to cabinet 1", "open cabinet 1", "close cabinet 1", "look"),
    )

    @property
    def failures(self) -> tuple[tuple[str, ...], ...]:
        return (self.wrong_take, self.premature, self.sink, self.looping) + self.wandering

    @property
    def mixed(self) -> tuple[tuple[str, ...], ...]:
        """One success and every failure."""
        return self.group(1)

    @property
    def failed(self) -> tuple[tuple[str, ...], ...]:
        """Eight failures, equal rewards."""
        return self.failures + (self.premature,)

    def group(self, successes: int, first: tuple[str, ...] | None = None
              ) -> tuple[tuple[str, ...], ...]:
        """A group of 8: ``successes`` copies of ``success``, then ``first`` (a failure the test
        is about) and the other failures in ``failures`` order, up to 8."""
        rest = [f for f in self.failures if f != first]
        failures = ([first] if first is not None else []) + rest
        return (self.success,) * successes + tuple(failures[:8 - successes])


@pytest.fixture(scope="session")
def case() -> CaseStudy:
    return CaseStudy()


@dataclass(frozen=True)
class Played:
    """One rollout played on the engine: what the collector records, and its trace."""

    actions: tuple[str, ...]
    observations: tuple[str, ...]
    snapshots: tuple[dict, ...]
    admissible: tuple[tuple[str, ...], ...]
    won: bool
    trace: RolloutTrace


@pytest.fixture(scope="session")
def heat_egg_task(tmp_path_factory):
    from agentcredit.envs.alfworld import scenes
    from agentcredit.envs.alfworld.engine import plan_game
    from agentcredit.envs.alfworld.generator import GameSpec, game_json
    from agentcredit.envs.alfworld.tasks import goal_sentence
    from agentcredit.envs.base import Task

    scene = scenes.load_scene(4)

    def first(rtype, k=1):
        return [r for r in scene.receptacles if r.rtype == rtype][:k]

    room = tuple(first("CounterTop", 2) + first("Fridge") + first("Microwave")
                 + first("SinkBasin") + first("Cabinet"))
    counter, fridge = first("CounterTop", 2)[0].rid, first("Fridge")[0].rid
    objects = (("Egg|+01.00|+01.00|+01.00", counter), ("Egg|+01.10|+01.00|+01.00", counter),
               ("Egg|+01.20|+01.00|+01.00", counter), ("Potato|+00.50|+01.00|+01.00", fridge),
               ("Bowl|+00.40|+01.00|+01.00", fridge), ("Plate|+00.30|+01.00|+01.00", fridge))
    sentence = goal_sentence("pick_heat_then_place", 0, "Egg", "CounterTop")
    spec = GameSpec("pick_heat_then_place", 4, room, objects, "Egg", "CounterTop", "", sentence)
    game = game_json(spec, "case-study-heat-egg")
    plan = plan_game(game)
    assert plan, "the case-study game must be solvable"
    game.update(solvable=True, walkthrough=plan)
    path = tmp_path_factory.mktemp("heat-egg") / "game.tw-pddl"
    path.write_text(json.dumps(game))
    return Task("case-study-heat-egg", "alfworld", "train", sentence, "pick_heat_then_place",
                payload={"game_file": str(path)})


@pytest.fixture(scope="session")
def heat_egg_env():
    from agentcredit.envs.alfworld.engine import AlfWorldEnv

    return AlfWorldEnv()


@pytest.fixture(scope="session")
def play(heat_egg_env, heat_egg_task):
    """``play(actions) -> Played``: run actions on the case-study game and trace them (cached)."""
    verifier = heat_egg_env.verifier(heat_egg_task)
    cache: dict[tuple[str, ...], Played] = {}

    def run(actions: tuple[str, ...]) -> Played:
        if actions not in cache:
            states = played_states(heat_egg_env, heat_egg_task, actions)
            cache[actions] = Played(actions, states.observations, states.snapshots,
                                    states.admissible, states.won,
                                    states.trace(verifier, actions))
        return cache[actions]

    return run


@pytest.fixture(scope="session")
def group_batch(play):
    """``group_batch(rollouts) -> CreditBatch``: one group played on the case-study game, outcome
    reward ``10·1[won]`` at the last step, GiGPO anchors = the observations before each step."""
    def build(rollouts: tuple[tuple[str, ...], ...]) -> CreditBatch:
        played = [play(actions) for actions in rollouts]
        rewards = [[0.0] * (len(p.actions) - 1) + [OUTCOME_REWARD * p.won] for p in played]
        anchors = [list(p.observations[:-1]) for p in played]
        return CreditBatch.from_lists(rewards, [0] * len(played), anchors,
                                      traces=[p.trace for p in played], dtype=torch.float32)

    return build
