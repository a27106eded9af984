"""Shared fixtures for the train/ tests: an ALFWorld-like corpus and one tiny checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentcredit.config import TinyModelConfig
from agentcredit.train.warm_start.model_bootstrap import bootstrap_tiny_model

ALFWORLD_TEXTS = [
    (
        "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, "
        "a countertop 2.\nYour task is to: heat some egg and put it in countertop."
    ),
    "go to countertop 1",
    "take egg 1 from countertop 2",
    "you arrive at countertop 2. on the countertop 2, you see a egg 1, and a knife 1.",
    "you pick up the egg 1 from the countertop 2.",
    "go to microwave 1",
    "heat egg 1 with microwave 1",
    "you heat the egg 1 using the microwave 1.",
    "put egg 1 in/on countertop 1",
    "open cabinet 1",
    "you open the cabinet 1. the cabinet 1 is open. in it, you see a plate 2.",
    "nothing happens.",
    "your task is to: put a clean plate in cabinet.",
    "examine countertop 1",
    "inventory",
]


@pytest.fixture(scope="session")
def alfworld_corpus() -> list[str]:
    """The ALFWorld-like texts, each repeated so its words pass the merge frequency."""
    return ALFWORLD_TEXTS * 3


@pytest.fixture(scope="session")
def tiny_config() -> TinyModelConfig:
    """A model small enough that the whole train/ suite runs in seconds on a CPU."""
    return TinyModelConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=64,
        max_position_embeddings=256,
        seed=0,
    )


@pytest.fixture(scope="session")
def tiny_model_dir(
    tmp_path_factory: pytest.TempPathFactory,
    alfworld_corpus: list[str],
    tiny_config: TinyModelConfig,
) -> Path:
    """One bootstrapped tiny checkpoint, shared by every test that only reads it."""
    return bootstrap_tiny_model(alfworld_corpus, tmp_path_factory.mktemp("tiny"), tiny_config)
