"""The embedded WebShop (1,000 generated products) shared by the WebShop tests."""

from __future__ import annotations

import pytest

from agentcredit.envs.webshop.engine import WebShopEnv
from agentcredit.envs.webshop.options import WebShopConfig
from agentcredit.envs.webshop.tasks import build_tasks

from .walks import random_actions as _random_actions


@pytest.fixture(scope="session")
def config() -> WebShopConfig:
    return WebShopConfig()


@pytest.fixture(scope="session")
def test_tasks(config):
    return build_tasks("test", config)


@pytest.fixture
def env() -> WebShopEnv:
    return WebShopEnv()


@pytest.fixture(scope="session")
def random_actions():
    """``random_actions(env, task, seed)``: a random walk that often ends in a purchase."""
    return _random_actions
