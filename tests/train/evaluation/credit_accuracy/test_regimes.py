"""The credit check on scripted policies (``train.evaluation.credit_accuracy.regimes``): Monte Carlo
continuations follow the same policy from a replayed state, checked against A^π worked out by
hand on a three-room corridor; the Table-12 row counts tie abstention apart."""

from __future__ import annotations

import random

import numpy as np
import pytest

from agentcredit.envs.base import Task
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.rollout.scripted import EpsilonPolicy, play
from agentcredit.train.evaluation.credit_accuracy.regimes import (
    ScriptedMonteCarlo,
    cell_method_settings,
    cell_methods,
    table12_row,
)

from ....conftest import FakeEnv

EPS, BUDGET = 0.3, 5
TASK = Task("corridor", "fake", "train", "take the apple", "type0",
            {"start": 0, "apple": 2, "size": 3})


class CorridorPlanner:
    """Walk right to the apple, take it; a wrong action is any other admissible one."""

    def expert(self, observation):
        return "take apple" if "take apple" in observation.admissible_actions else "go right"

    def wrong(self, observation, expert):
        return [a for a in observation.admissible_actions if a != expert]

    def observe(self, action, observation, info):
        pass


def corridor_start(env, task, rng):
    return CorridorPlanner(), env.reset(task)


def corridor_value(room: int, left: int) -> float:
    """V^π(room, steps left) by the recursion of the ε policy: room 0 can only go right; rooms
    1 and 2 take the expert's move with prob. 1 − ε, the one other action with prob. ε."""
    if left == 0:
        return 0.0
    if room == 0:
        return corridor_value(1, left - 1)
    if room == 1:
        return (1 - EPS) * corridor_value(2, left - 1) + EPS * corridor_value(0, left - 1)
    return (1 - EPS) * 1.0 + EPS * corridor_value(1, left - 1)


def _played(actions: list[str]) -> Trajectory:
    """A won rollout of ``actions`` on the corridor, recorded as ``play`` records one."""
    traj, env = Trajectory(TASK, 0, won=True), FakeEnv()
    obs = env.reset(TASK)
    for a in actions:
        after, _, _, info = env.step(a)
        traj.steps.append(Step(obs.text, a, a, info.valid, 0.0, obs.text, {}, [], [], []))
        obs = after
    return traj


def test_corridor_value_by_hand():
    # (1,2): right then take, 0.7·0.7 = 0.49; (2,3): take, or left to (1,2): 0.7 + 0.3·0.49
    # = 0.847; (0,3) is (1,2); (1,4): 0.7·0.847 + 0.3·0.49 = 0.7399; room 0 must go right
    assert corridor_value(1, 2) == pytest.approx(0.49)
    assert corridor_value(2, 3) == pytest.approx(0.847)
    assert corridor_value(0, 5) == pytest.approx(0.7399)


def test_monte_carlo_continuations_follow_the_policy_from_the_replayed_state():
    # a rollout that slips once: right, left (wrong), right, right, take
    traj = _played(["go right", "go left", "go right", "go right", "take apple"])
    rooms = [0, 1, 0, 1, 2]
    mc = ScriptedMonteCarlo(FakeEnv(), EpsilonPolicy(corridor_start, EPS), BUDGET,
                            continuations=4000, seed=1)
    values = [corridor_value(r, BUDGET - t) for t, r in enumerate(rooms)] + [1.0]
    # A^π(s_t, a_t) = V(s_{t+1}) − V(s_t); 4000 continuations: standard error <= 0.011
    assert mc.estimate([traj]).values == pytest.approx(np.diff(values), abs=0.04)


def test_continuations_differ_from_a_policy_that_does_not_slip():
    # the same states under ε = 0 have A = 0 on the expert's steps: the estimate reads the
    # policy it was given, not a fixed expert
    traj = play(FakeEnv(), TASK, EpsilonPolicy(corridor_start, 0.0), random.Random(0), BUDGET)
    greedy = ScriptedMonteCarlo(FakeEnv(), EpsilonPolicy(corridor_start, 0.0), BUDGET, 50)
    noisy = ScriptedMonteCarlo(FakeEnv(), EpsilonPolicy(corridor_start, EPS), BUDGET, 4000)
    assert greedy.estimate([traj]).values == pytest.approx([0.0, 0.0, 0.0])
    expected = np.diff([corridor_value(0, 5), corridor_value(1, 4), corridor_value(2, 3), 1.0])
    assert noisy.estimate([traj]).values == pytest.approx(expected, abs=0.04)


def _diagnostics(**abstain) -> dict[str, float]:
    out = {f"vict/{k}": 1.0 for k in ("trigger_pct", "sparsity_pct", "nonzero_steps_per_rollout",
                                     "core_size_mean", "budget_hit_pct", "lambda")}
    for reason in ("non_conforming", "tie", "budget", "no_edge", "terminal_only"):
        out[f"vict/abstain/{reason}_pct"] = abstain.get(reason, 0.0)
    out["vict/abstain_pct"] = sum(abstain.values())
    out["vict/abstain_tie_group_pct"] = 30.0
    out["vict/corrected_share"] = 0.25
    return out


def test_table12_counts_tie_abstention_apart_from_the_other_reasons():
    row = table12_row(_diagnostics(tie=50.0, no_edge=10.0, terminal_only=5.0),
                      untied_rollout_share=0.25)
    assert row["abstain_pct"] == 65.0
    assert row["abstain_tie_pct"] == 50.0
    assert row["abstain_other_pct"] == 15.0  # no_edge + terminal_only, the tie left out
    assert row["abstain_tie_group_pct"] == 30.0
    assert row["abstain_tie_median_pct"] == 20.0  # the tie less the whole-group ties
    assert row["tied_group_rollout_pct"] == 75.0
    assert row["corrected_share"] == 0.25


def test_a_reading_runs_only_on_the_environments_it_applies_to():
    assert cell_methods("searchqa", ("grpo", "vict")) == [
        "grpo", "vict", "vict+mean", "vict+counterfactual", "vict+decided"]
    assert cell_methods("webshop", ("grpo", "vict")) == [
        "grpo", "vict", "vict+mean", "vict+counterfactual"]  # no answer scope to choose
    assert cell_method_settings("vict+decided") == ["method=vict",
                                                "env.searchqa.answer_scope=decided"]
    with pytest.raises(KeyError, match="vict\\+mode"):
        cell_methods("searchqa", readings=("vict+mode",))
