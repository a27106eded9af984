"""A small generated search QA world (1,000 passages) shared by the searchqa tests."""

from __future__ import annotations

import pytest

from agentcredit.envs.searchqa.engine import SearchQAEnv
from agentcredit.envs.searchqa.options import SearchQAConfig
from agentcredit.envs.searchqa.tasks import build_tasks


@pytest.fixture(scope="session")
def config() -> SearchQAConfig:
    return SearchQAConfig(num_passages=1000, train_questions=60, valid_questions=30,
                          test_questions=60)


@pytest.fixture(scope="session")
def test_tasks(config):
    return build_tasks("test", config)


@pytest.fixture
def env() -> SearchQAEnv:
    return SearchQAEnv()
