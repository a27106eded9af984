"""Generated ALFWorld games shared by the environment tests (one small game set per session)."""

from __future__ import annotations

import pytest

from agentcredit.envs.alfworld.engine import AlfWorldEnv
from agentcredit.envs.alfworld.generator import GeneratorConfig, generate_split
from agentcredit.envs.alfworld.tasks import TASK_TYPES

SMALL = GeneratorConfig(seed=7, max_receptacles=12)


@pytest.fixture(scope="session")
def game_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("alfworld-games")


@pytest.fixture(scope="session")
def train_games(game_cache):
    """Two small training games of every task type."""
    return generate_split("train", 2, SMALL, game_cache)


@pytest.fixture(scope="session")
def games_by_type(train_games):
    return {t: [g for g in train_games if g.task_type == t] for t in TASK_TYPES}


@pytest.fixture(scope="session")
def env():
    return AlfWorldEnv()
