"""The embedded WebShop (1,000 generated products) shared by the WebShop tests."""

from __future__ import annotations

import random

import pytest

from agentcredit.envs.webshop import WebShopConfig, WebShopEnv, build_tasks


@pytest.fixture(scope="session")
def config() -> WebShopConfig:
    return WebShopConfig()


@pytest.fixture(scope="session")
def test_tasks(config):
    return build_tasks("test", config)


@pytest.fixture
def env() -> WebShopEnv:
    return WebShopEnv()


def _random_actions(env, task, seed: int, buy_bias: float = 0.3) -> list[str]:
    """A random walk over the admissible actions; searches use words of the instruction.

    With probability ``buy_bias`` an item page is answered with ``buy now`` so
    that random walks end in purchases of all kinds.
    """
    rng, actions = random.Random(seed), []
    words = task.instruction.replace(",", " ").split()
    obs, done = env.reset(task), False
    while not done:
        options = list(obs.admissible_actions)
        if options == ["search[<your query>]"]:
            action = "search[" + " ".join(rng.sample(words, min(len(words), rng.randint(1, 5)))) + "]"
        elif "click[buy now]" in options and rng.random() < buy_bias:
            action = "click[buy now]"
        else:
            action = rng.choice(options)
        actions.append(action)
        obs, _, done, _ = env.step(action)
    return actions


@pytest.fixture(scope="session")
def random_actions():
    """``random_actions(env, task, seed)``: a random walk that often ends in a purchase."""
    return _random_actions
