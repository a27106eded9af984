"""ALFWorld's solver truth (``envs.alfworld.solver.distance_to_finish``): the demonstrator's
remaining steps from a replayed prefix."""

from __future__ import annotations

import pytest

from agentcredit.envs.alfworld import expert
from agentcredit.envs.alfworld.solver import distance_to_finish
from agentcredit.envs.base import ReplayMismatch

from .test_expert import _replay


def test_the_distance_to_finish_counts_the_demonstrators_remaining_steps(env, games_by_type):
    task = games_by_type["pick_clean_then_place"][0]
    actions = expert.demonstrate(env, task)
    observations = _replay(env, task, actions)[0][1:]
    assert distance_to_finish(env, task, [], 99) == len(actions)
    assert distance_to_finish(env, task, actions[:3], 99, None,
                                     observations[:3]) == len(actions) - 3
    assert distance_to_finish(env, task, actions, 99) == 0
    assert distance_to_finish(env, task, [], 2) == 2  # capped
    # an invalid action changes nothing and costs the solver nothing
    assert distance_to_finish(env, task, ["fly away"], 99) == len(actions)
    with pytest.raises(ReplayMismatch, match="does not replay identically"):
        distance_to_finish(env, task, actions[:1], 99, None, ["something else"])
