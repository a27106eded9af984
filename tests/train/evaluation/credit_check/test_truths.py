"""The solver and Monte Carlo truths on corridor rollouts whose true values are worked by hand.

``FakeEnv`` (``tests/conftest.py``): a corridor of 4 rooms; ``go left`` / ``go right`` move,
``take apple`` wins in the apple room; any other action is invalid and changes nothing.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from agentcredit.envs.base import ReplayMismatch, Task
from agentcredit.rollout.collector import CollectorConfig, RolloutCollector
from agentcredit.rollout.policy import Generation
from agentcredit.rollout.records import Trajectory
from agentcredit.train.evaluation.credit_check.truths import (
    MonteCarloTruth,
    SolverTruth,
    TieBreaks,
)

from ....conftest import FakeEnv
from ....corridor import corridor_distance
from ....played import played as played_in


def corridor_task(start: int, apple: int) -> Task:
    return Task(task_id=f"s{start}a{apple}", env="fake", split="train",
                instruction="take the apple", task_type="type0",
                payload={"start": start, "apple": apple, "size": 4})


def played(task: Task, actions: list[str], group_id: int = 0) -> Trajectory:
    """The trajectory ``actions`` make in the corridor (recorded as a collector records)."""
    return played_in(FakeEnv(), task, actions, group_id)


def test_solver_regret_is_zero_for_optimal_steps_and_counts_wasted_ones():
    task = corridor_task(0, 2)
    # d: 3, 2, 3, 2, 2 (the take in room 1 is invalid), 1, 0
    traj = played(task, ["go right", "go left", "go right", "take apple", "go right",
                         "take apple"])
    truth = SolverTruth(FakeEnv, corridor_distance, cap=20, tie_breaks=2)
    estimate = truth.estimate([traj])
    assert estimate.values.tolist() == [0.0, -2.0, 0.0, -1.0, 0.0, 0.0]
    assert estimate.steps == 6


def test_solver_truth_leaves_unchosen_rollouts_unknown_and_shares_states():
    task = corridor_task(0, 1)
    a, b = played(task, ["go right", "take apple"]), played(task, ["go right", "go left"])
    estimate = SolverTruth(FakeEnv, corridor_distance, cap=20).estimate([a, b], rollouts=[1])
    assert np.isnan(estimate.values[:2]).all()
    assert estimate.values[2:].tolist() == [0.0, -2.0]
    both = SolverTruth(FakeEnv, corridor_distance, cap=20).estimate([a, b])
    assert both.stats["states"] == 3  # s_0 and "go right" are shared; a's end is won


def test_tie_breaks_draw_as_random_does_and_count_only_real_ties():
    ours, plain = TieBreaks(5), random.Random(5)
    assert [ours.choice("abc") for _ in range(6)] == [plain.choice("abc") for _ in range(6)]
    assert ours.ties == 6
    assert ours.choice(["only"]) == plain.choice(["only"]) == "only" and ours.ties == 6
    assert ours.random() == plain.random() and ours.ties == 7
    assert ours.choice("xy") == plain.choice("xy") and ours.ties == 8


def test_the_solver_plays_the_other_tie_breaks_only_where_the_first_broke_a_tie():
    # the start state has a tie (d + 0 or d + 2 at random); later states only one-item choices
    def tied(env, task, prefix, cap, rng, observations):
        d = corridor_distance(env, task, prefix, cap, rng, observations)
        return d + (rng.choice([0, 2]) if not prefix else rng.choice([0]))

    task = corridor_task(0, 2)
    traj = played(task, ["go right", "go right", "take apple"])
    estimate = SolverTruth(FakeEnv, tied, cap=20, tie_breaks=4, seed=1).estimate([traj])
    # s_0 is played 4 times, s_1 and s_2 once each; the won end needs no call
    assert estimate.stats["solver_calls"] == 4 + 1 + 1
    extra = np.mean([random.Random(1 * 7919 + s).choice([0, 2]) for s in range(4)])
    assert estimate.values.tolist() == [3 + extra - 2 - 1, 0.0, 0.0]


def test_a_replay_that_differs_from_the_record_is_refused():
    traj = played(corridor_task(0, 2), ["go right", "go right"])
    traj.steps[1].observation = "You are in room 7."
    with pytest.raises(ReplayMismatch, match="does not replay identically"):
        SolverTruth(FakeEnv, corridor_distance, cap=20).estimate([traj])


class WalkRight:
    """A scripted policy: ``take apple`` when the current observation shows it, else
    ``go right``; it reads the room from the prompt, as a policy must."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.calls = 0

    def generate(self, prompts, *, temperature, max_new_tokens, generator, tries=None,
                 prompt_cache=None):
        self.calls += 1
        out = []
        for ids in prompts:
            text = self.tokenizer.decode(ids)
            current = re.split(r"(?i)current observation", text)[-1]
            action = "take apple" if "apple." in current.split("dmissible")[0] else "go right"
            out.append(Generation(token_ids=[], logprobs=[], text=action))
        return out


# chunk 3 < the 16 continuations: slots are refilled as continuations of different lengths end
@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_monte_carlo_truth_matches_the_hand_worked_values(fake_tokenizer, chunk):
    # apple in room 2, 4 steps: from reset the walk-right policy wins in 3
    task = corridor_task(0, 2)
    traj = played(task, ["go left", "go left", "go right", "go right"])  # two invalid steps
    collector = RolloutCollector(WalkRight(fake_tokenizer), FakeEnv, CollectorConfig(max_steps=4))
    estimate = MonteCarloTruth(collector, temperature=1.0, continuations=4,
                               chunk=chunk).estimate([traj])
    # V: s_0 1 (3 steps needed, 4 left), s_1 1 (3 left), s_2 0 (2 left), s_3 0, the end 0
    assert estimate.values.tolist() == [0.0, -1.0, 0.0, 0.0]
    assert estimate.stats["se_mean"] == 0.0  # every continuation agrees
    assert estimate.stats["split_half"] == pytest.approx(1.0)
    assert estimate.stats["continuations"] == 4 * 4


@pytest.mark.parametrize("chunk", [3, 64])
def test_monte_carlo_states_of_a_shared_prefix_are_sampled_once(fake_tokenizer, chunk):
    task = corridor_task(0, 1)
    group = [played(task, ["go right", "take apple"]),
             played(task, ["go right", "go right", "go left", "go left"])]
    collector = RolloutCollector(WalkRight(fake_tokenizer), FakeEnv, CollectorConfig(max_steps=4))
    estimate = MonteCarloTruth(collector, temperature=1.0, continuations=2,
                               chunk=chunk).estimate(group)
    # sampled: s_0 and "go right" once for both, then the second rollout's rooms 2 and 1;
    # V = 1, 1 | won | 0 (room 2, walks right), 1 (room 1, takes), lost end
    assert estimate.stats["states"] == 4
    assert estimate.values.tolist() == [0.0, 0.0, 0.0, -1.0, 1.0, -1.0]


def test_monte_carlo_refuses_a_replay_that_differs(fake_tokenizer):
    traj = played(corridor_task(0, 2), ["go right", "go right"])
    traj.steps[1].observation = "You are in room 7."
    collector = RolloutCollector(WalkRight(fake_tokenizer), FakeEnv, CollectorConfig(max_steps=4))
    with pytest.raises(ReplayMismatch):
        MonteCarloTruth(collector, temperature=1.0, continuations=2).estimate([traj])


def test_webshop_has_its_planner_distance_as_a_built_in_solver():
    from agentcredit.envs.webshop.solver import distance_to_buy
    from agentcredit.train.evaluation.credit_check.truths import solver_for

    assert solver_for("webshop") is distance_to_buy
