"""The batch source (train/batch_source.py): the groups drawn from the pool, and DAPO's
dynamic sampling (``method=dapo``) that judges returns after the overlong penalty, drops
equal-return groups and never leaves an update empty; the preset's settings."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from agentcredit.config import load_config
from agentcredit.credit.overlong import OverlongPenalty
from agentcredit.envs.base import Task
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.run.random_streams import RandomStreams
from agentcredit.train.batch_source import (
    GroupSource,
    collect_with_signal,
    draw_tasks,
    round_first_group_id,
    shaped_return,
)

#: L_max = 20, buffer 0.2, c = 0.1
DAPO = OverlongPenalty(max_tokens=20, buffer=0.2, penalty=0.1)
STREAMS = RandomStreams(random.Random(0), torch.Generator().manual_seed(0))


def _trajectory(group_id: int, reward: float, length: int = 1) -> Trajectory:
    task = Task(f"t{group_id}", "fake", "train", "take the apple", "type0")
    step = Step("obs", "go", "go", True, reward, "obs", {}, [1], [2] * length, [-1.0] * length)
    return Trajectory(task=task, group_id=group_id, steps=[step])


def dapo_return(trajectory: Trajectory) -> float:
    """``R_i`` with the overlong penalty of L_max = 20, buffer 0.2, c = 0.1."""
    return shaped_return(trajectory, DAPO)


class FakeCollector:
    """A collector whose ``collect(tasks, 2)`` call number ``r`` (its collection round) plays
    two rollouts of each task; ``signal[r]`` says which of the round's groups have different
    returns (cycling). Every call is recorded as ``(round, tasks)``."""

    def __init__(self, signal: dict[int, list[bool]]):
        self.signal = signal
        self.calls: list[tuple[int, int]] = []

    def collect(self, tasks, group_size, *, first_group_id, **settings) -> list[Trajectory]:
        round_index = len(self.calls)
        self.calls.append((round_index, len(tasks)))
        pattern = itertools.cycle(self.signal.get(round_index, [False]))
        out = []
        for gid in range(first_group_id, first_group_id + len(tasks)):
            out += [_trajectory(gid, 10.0), _trajectory(gid, 0.0 if next(pattern) else 10.0)]
        return out


POOL = [Task(f"t{i}", "fake", "train", "take the apple", "type0") for i in range(3)]


def fake_source(signal: dict[int, list[bool]], groups: int = 1, rounds: int = 0) -> GroupSource:
    """A ``GroupSource`` of ``groups`` groups and ``rounds`` extra rounds over a
    ``FakeCollector`` of ``signal``."""
    return GroupSource(FakeCollector(signal), POOL, group_size=2, temperature=1.0,
                       groups=groups, rounds=rounds, overlong=DAPO)


class Replay:
    """A collector that plays ``trajectories`` every round."""

    def __init__(self, trajectories: list[Trajectory]):
        self.trajectories = trajectories

    def collect(self, tasks, group_size, **settings) -> list[Trajectory]:
        return self.trajectories


def replay(trajectories: list[Trajectory]) -> GroupSource:
    """A source of one group and two extra rounds that collects ``trajectories`` every round."""
    return GroupSource(Replay(trajectories), POOL, group_size=2, temperature=1.0, groups=1,
                       rounds=2, overlong=DAPO)


def test_returns_are_judged_after_the_overlong_penalty():
    # the same outcome, but one response ran to the limit: −0.1 sets the pair apart
    assert dapo_return(_trajectory(0, 10.0, length=20)) == pytest.approx(9.9)
    assert dapo_return(_trajectory(0, 10.0, length=16)) == 10.0
    pair = [_trajectory(0, 10.0, length=20), _trajectory(0, 10.0)]
    assert len(collect_with_signal(replay(pair), 1, STREAMS).trajectories) == 2
    invalid_and_overlong = [_trajectory(0, 9.9), _trajectory(0, 10.0, length=20)]
    assert collect_with_signal(replay(invalid_and_overlong), 1, STREAMS).empty


def test_dynamic_sampling_drops_equal_return_groups_and_collects_the_missing_ones():
    source = fake_source({0: [True, False, False], 1: [False, True], 2: [True]}, 3, 4)
    sampled = collect_with_signal(source, 1, STREAMS)
    # it stops once three groups have signal
    assert source.collector.calls == [(0, 3), (1, 2), (2, 1)]
    kept = {t.group_id for t in sampled.trajectories}
    round_ids = [round_first_group_id(1, r, 3, 4) for r in range(3)]
    assert kept == {round_ids[0], round_ids[1] + 1, round_ids[2]}
    assert len(sampled.trajectories) == 6
    assert (sampled.rounds, sampled.dropped, sampled.empty) == (3, 3, False)
    assert all(len({t.total_reward for t in sampled.trajectories if t.group_id == g}) == 2
               for g in kept)


@pytest.mark.parametrize("rounds", [1, 3])
def test_dynamic_sampling_never_leaves_an_update_empty(rounds):
    source = fake_source({}, 2, rounds)  # every group of every round has equal returns
    sampled = collect_with_signal(source, 1, STREAMS)
    assert len(source.collector.calls) == rounds + 1
    assert sampled.trajectories and sampled.empty
    assert len({t.group_id for t in sampled.trajectories}) == 2  # the last round's groups
    assert sampled.metrics() == {"dynamic/rounds": rounds + 1.0,
                                 "dynamic/dropped_groups": 2.0 * (rounds + 1),
                                 "dynamic/empty": 1.0}


def test_dynamic_sampling_keeps_what_it_found_when_the_rounds_run_out():
    sampled = collect_with_signal(fake_source({0: [True, False, False]}, 3, 2), 1, STREAMS)
    assert {t.group_id for t in sampled.trajectories} == {0} and not sampled.empty


def test_without_rounds_one_collection_is_kept_whole():
    source = fake_source({}, 2, 0)
    sampled = collect_with_signal(source, 1, STREAMS)
    assert source.collector.calls == [(0, 2)]
    assert len(sampled.trajectories) == 4 and not sampled.empty


def test_every_collection_round_of_a_run_has_its_own_group_ids():
    groups, rounds = 4, 3
    seen = set()
    for update, round_index in itertools.product(range(1, 6), range(rounds + 1)):
        first = round_first_group_id(update, round_index, groups, rounds)
        block = set(range(first, first + groups))
        assert not block & seen
        seen |= block
    assert round_first_group_id(3, 0, groups, rounds) == 2 * groups  # no sampling: unchanged


def test_the_dapo_preset_is_grpo_with_clip_higher_overlong_penalty_and_dynamic_sampling():
    config = load_config(None, ["method=dapo"])
    assert config.credit.estimator == "grpo"
    assert (config.optim.clip_low, config.optim.clip_high) == (0.2, 0.28)
    assert config.rollout.overlong_buffer == 0.2 and config.rollout.overlong_penalty == 0.1
    assert config.rollout.dynamic_sampling_rounds == 3


def test_a_group_source_draws_from_the_pool_and_numbers_each_rounds_groups():
    class Recorder:
        def __init__(self):
            self.calls = []

        def collect(self, tasks, group_size, **kwargs):
            self.calls.append((tasks, group_size, kwargs))
            return []

    recorder, generator = Recorder(), torch.Generator()
    # 5 groups from a pool of 3: drawn with replacement; no signal: both rounds collect 5
    source = GroupSource(recorder, POOL, group_size=2, temperature=0.7, groups=5, rounds=1,
                         overlong=DAPO)
    collect_with_signal(source, 2, RandomStreams(random.Random(0), generator))
    (first, size, settings), (second, _, again) = recorder.calls
    assert len(first) == len(second) == 5 and size == 2
    assert {t.task_id for t in first} <= {t.task_id for t in POOL}
    assert settings["first_group_id"] == round_first_group_id(2, 0, 5, 1) == 5
    assert again["first_group_id"] == round_first_group_id(2, 1, 5, 1)
    assert settings["temperature"] == 0.7 and settings["generator"] is generator
    assert settings["skills"] is None


def test_tasks_are_drawn_without_replacement_while_the_pool_holds_enough():
    assert sorted(t.task_id for t in draw_tasks(POOL, 3, random.Random(0))) == ["t0", "t1", "t2"]
    assert len(draw_tasks(POOL, 7, random.Random(0))) == 7
