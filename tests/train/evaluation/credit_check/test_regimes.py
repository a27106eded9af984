"""The credit check on scripted policies (``train.evaluation.credit_check.regimes``): Monte Carlo
continuations follow the same policy from a replayed state, checked against A^π worked out by
hand on a three-room corridor; the Table-12 row counts tie abstention apart."""

from __future__ import annotations

import random

import numpy as np
import pytest

from agentcredit.envs.base import Task
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.rollout.scripted import EpsilonPolicy, play
from agentcredit.train.evaluation.credit_check.regimes import (
    PAPER_TABLE12,
    ScriptedMonteCarlo,
    cell_method_settings,
    cell_methods,
    table12_row,
    table12_vs_paper,
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


REASONS = ("non_conforming", "tie", "budget", "no_edge", "terminal_only")


def _diagnostics(facts=None, **abstain) -> dict[str, float]:
    out = {f"vict/{k}": 1.0 for k in ("trigger_pct", "sparsity_pct", "nonzero_steps_per_rollout",
                                     "nonzero_steps_per_triggered", "core_size_mean",
                                     "core_picked_mean", "core_closure_mean", "budget_hit_pct",
                                     "lambda")}
    facts = facts or {}
    for reason in REASONS:
        out[f"vict/abstain/{reason}_pct"] = abstain.get(reason, 0.0)
        out[f"vict/abstain_fact/{reason}_pct"] = facts.get(reason, 0.0)
    out["vict/abstain_pct"] = sum(abstain.values())
    out["vict/abstain_fact_pct"] = sum(facts.values())
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
    assert row["abstain_fact_top_reason"] == "-"  # no fact abstained


def test_table12_ranks_the_reasons_facts_abstained_for_apart_from_the_rollouts():
    row = table12_row(_diagnostics(facts={"no_edge": 2.0, "terminal_only": 6.0}, tie=50.0),
                      untied_rollout_share=0.5)
    assert row["abstain_fact_pct"] == 8.0 and row["abstain_pct"] == 50.0
    assert row["abstain_fact_terminal_only_pct"] == 6.0
    assert row["abstain_fact_top_reason"] == "terminal_only"


def _cell(env: str, eps: float, success: float, trigger: float) -> dict:
    row = {"trigger_pct": trigger, "sparsity_pct": 10.0, "nonzero_steps_per_triggered": 2.35,
           "core_size_mean": 2.9, "budget_hit_pct": 0.0, "abstain_fact_pct": 4.05}
    return {"env": env, "epsilon": eps, "success_rate": success, "table12": {"vict": row}}


def test_table12_beside_the_paper_takes_the_cell_nearest_the_papers_success_rate():
    # the paper's ALFWorld policy: 92.35% success; WebShop 82.65%; Search-QA has no row
    cells = [_cell("alfworld", 0.44, 0.83, 30.9), _cell("alfworld", 0.53, 0.62, 50.0),
             _cell("webshop", 0.2, 0.91, 57.2), _cell("webshop", 0.3, 0.77, 28.6),
             _cell("searchqa", 0.05, 0.92, 40.0)]
    side = table12_vs_paper(cells)
    assert set(side) == {"alfworld", "webshop"}
    assert (side["alfworld"]["epsilon"], side["alfworld"]["success_rate"]) == (0.44, 0.83)
    # |0.91 − 0.8265| = 0.0835 > |0.77 − 0.8265| = 0.0565: the 77% cell is nearer
    assert side["webshop"]["epsilon"] == 0.3
    ratio = side["alfworld"]["ratio"]
    assert ratio["trigger_pct"] == pytest.approx(0.5)  # 30.9 / 61.8
    assert ratio["nonzero_steps_per_triggered"] == pytest.approx(0.5)  # 2.35 / 4.7
    assert ratio["core_size_mean"] == pytest.approx(1.0)
    assert ratio["abstain_fact_pct"] == pytest.approx(0.5)  # 4.05 / 8.1
    assert side["webshop"]["ratio"]["trigger_pct"] == pytest.approx(0.5)  # 28.6 / 57.2
    assert side["alfworld"]["paper"]["top_reason"] == "terminal-only fact"
    assert side["alfworld"]["paper_success"] == PAPER_TABLE12["alfworld"]["success"]


def test_a_reading_runs_only_on_the_environments_it_applies_to():
    assert cell_methods("searchqa", 0.9, ("grpo", "vict")) == [
        "grpo", "vict", "vict+median", "vict+counterfactual", "vict+decided"]
    assert cell_methods("webshop", 0.9, ("grpo", "vict")) == [
        "grpo", "vict", "vict+median", "vict+counterfactual"]  # no answer scope to choose
    assert cell_method_settings("vict+decided") == ["method=vict",
                                                "env.searchqa.answer_scope=decided"]
    assert cell_method_settings("vict+median") == ["method=vict", "credit.options.centre=median"]
    with pytest.raises(KeyError, match="vict\\+mode"):
        cell_methods("searchqa", 0.5, readings=("vict+mode",))


def test_the_gamma_sweep_runs_only_in_the_mid_success_cells():
    sweep = ["vict+gamma0.25", "vict+gamma1"]
    for success in (0.3, 0.5, 0.7):  # the range is closed
        assert cell_methods("webshop", success, ("vict",))[-2:] == sweep
    for success in (0.29, 0.71, 0.92):
        assert not set(sweep) & set(cell_methods("webshop", success, ("vict",)))
    assert cell_method_settings("vict+gamma1") == ["method=vict",
                                                   "credit.options.gamma_lambda=1.0"]
