"""Shared test fixtures: a tiny in-memory environment that speaks the agentcredit protocol,
and a tokenizer and tiny model trained on its text.

``FakeEnv`` is a corridor of rooms; the task is to walk to the room with the
apple and take it. It is deterministic, instant, and has an expert, so the
rollout collector and the whole training loop can be tested without ALFWorld.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentcredit.config import TinyModelConfig
from agentcredit.envs.base import Observation, StepInfo, Task
from agentcredit.envs.suites import GamesPerType
from agentcredit.rollout.prompts import system_message
from agentcredit.train.warm_start.model_bootstrap import bootstrap_tiny_model
from agentcredit.train.warm_start.tokenizer_bootstrap import train_bpe_tokenizer
from agentcredit.verifier.atoms import Verifier

from .corridor import corridor_verifier

NOTHING_HAPPENS = "Nothing happens."


class FakeEnv:
    """A corridor ``0..size-1``; ``go left`` / ``go right`` move, ``take apple`` wins in the apple
    room."""

    name = "fake"

    def __init__(self) -> None:
        self.room = 0
        self.won = False
        self.task: Task | None = None

    def _text(self) -> str:
        here = ("You see an apple." if self.room == self.task.payload["apple"]
                else "The room is empty.")
        return f"You are in room {self.room}. {here}"

    def admissible_actions(self) -> tuple[str, ...]:
        size, actions = self.task.payload["size"], []
        if self.room > 0:
            actions.append("go left")
        if self.room < size - 1:
            actions.append("go right")
        if self.room == self.task.payload["apple"] and not self.won:
            actions.append("take apple")
        return tuple(actions)

    def reset(self, task: Task) -> Observation:
        self.task, self.room, self.won = task, task.payload["start"], False
        return Observation(self._text(), self.admissible_actions())

    def step(self, action_text: str) -> tuple[Observation, float, bool, StepInfo]:
        action = action_text.strip()
        if self.won or action not in self.admissible_actions():
            return (Observation(NOTHING_HAPPENS, self.admissible_actions()), float(self.won),
                    self.won, StepInfo(valid=False, won=self.won))
        if action == "take apple":
            self.won = True
            text = "You take the apple."
        else:
            self.room += 1 if action == "go right" else -1
            text = self._text()
        return (Observation(text, self.admissible_actions()), float(self.won), self.won,
                StepInfo(valid=True, won=self.won))

    def snapshot(self) -> dict[str, Any]:
        return {"room": self.room, "won": self.won}

    def verifier(self, task: Task) -> Verifier:
        return corridor_verifier(task)

    def expert(self, task: Task) -> list[str]:
        start, apple = task.payload["start"], task.payload["apple"]
        move = "go right" if apple > start else "go left"
        return [move] * abs(apple - start) + ["take apple"]


def fake_task(split: str, index: int, size: int = 4) -> Task:
    """Task ``index`` of ``split``: a deterministic (start, apple) pair."""
    start, apple = index % size, (index * 3 + 1 + (split != "train")) % size
    return Task(task_id=f"{split}-{index}", env="fake", split=split,
                instruction="take the apple", task_type=f"type{index % 2}",
                payload={"start": start, "apple": apple, "size": size})


class FakeSuite:
    """The ``EnvSuite`` of the fake environment: ``train_games_per_type`` × 2 train tasks, etc."""

    splits = ("train", "valid_seen", "valid_unseen")
    validation_splits = ("valid_seen", "valid_unseen")

    def __init__(self, options: None = None, games: GamesPerType | None = None) -> None:
        self.games = games or GamesPerType(train=1, valid=1)

    def tasks(self, split: str) -> list[Task]:
        per_type = self.games.train if split == "train" else self.games.valid
        return [fake_task(split, i) for i in range(2 * per_type)]

    def make_env(self) -> FakeEnv:
        return FakeEnv()


@pytest.fixture(scope="session")
def fake_suite() -> type[FakeSuite]:
    """Registers the fake environment as env suite ``fake`` and returns the suite class."""
    from agentcredit.envs.suites import register_environment

    register_environment("fake", FakeSuite)
    return FakeSuite


@pytest.fixture(scope="session")
def tiny_fake_run(fake_suite) -> tuple[str, ...]:
    """Overrides for a seconds-long training run: the fake corridor environment, a
    1-layer 32-wide model, 4-step rollouts, one thread, no progress bar; free-text
    actions, a one-step window and a KL pass, so a tiny policy still makes mistakes that
    give its groups a signal, and every scoring pass runs; no RL pool (RL on every train
    task). Rollouts at temperature 1 (the embedded default samples at the evaluation's 0.4):
    the tests tell training from evaluation sampling by temperature, and the fake verl actor
    scores at 1. No start cache: every test trains its own warm start
    (``tests/train/warm_start/test_start_cache.py`` tests the cache)."""
    return (
        "run.progress=false", "run.threads=1", "sft.cache=false", "rollout.temperature=1.0",
        "rollout.decoding=free", "rollout.history_window=1", "rollout.history_style=pairs",
        "optim.kl_coef=0.01",
        "model.tiny.hidden_size=32", "model.tiny.num_hidden_layers=1",
        "model.tiny.num_attention_heads=2", "model.tiny.num_key_value_heads=1",
        "model.tiny.intermediate_size=64", "model.tiny.max_position_embeddings=512",
        "rollout.max_steps=4", "rollout.max_new_tokens=6",
        "env=fake", "env.train_games_per_type=2", "env.valid_games_per_type=1",
        "env.pool_games_per_type=0",
    )


#: the settings of ``report_runs`` on top of ``tiny_fake_run``
REPORT_RUN = (
    "run.eval_every=1", "run.checkpoint_every=1", "run.save_rollouts=1",
    "sft.epochs=30", "sft.batch_size=4", "sft.lr=0.01",
    "rollout.group_size=4", "rollout.tasks_per_update=2",
    "optim.lr=1e-3", "optim.mini_batches=2", "optim.micro_batch_size=4",
)


@pytest.fixture(scope="session")
def skills_root(tmp_path_factory) -> Path:
    """Skill texts for the fake environment's two task types (ADRS's teacher reads them)."""
    root = tmp_path_factory.mktemp("skills")
    folder = root / "fake"
    folder.mkdir()
    (folder / "guide.md").write_text("Walk the corridor room by room until you see the apple.\n")
    (folder / "type0.md").write_text("Type zero: the apple is often to the right; take it.\n")
    (folder / "type1.md").write_text("Type one: the apple may be to the left; take it.\n")
    return root


@pytest.fixture(scope="session")
def report_runs(tiny_fake_run, skills_root, tmp_path_factory) -> Path:
    """A folder with ``vict_seed0`` (3 updates, the newest 2 saved) and ``adrs_seed0``
    (2 updates, both saved), real runs of the fake corridor that save every update's
    rollouts, trained once per session for the saved-rollout and report tests: VICT with
    ledger rows (SFT is stopped early enough that groups mix wins and losses) and ADRS with
    teacher scores (so token heat-maps). VICT's update 2 is credit-checked against the
    corridor's solver, so saved with its truth; update 3 is not."""
    from agentcredit.config import load_config
    from agentcredit.train.evaluation.credit_check.truths import register_solver
    from agentcredit.train.loop import train

    from .corridor import corridor_distance

    root = tmp_path_factory.mktemp("report_runs")
    register_solver("fake", corridor_distance)
    runs = {"vict_seed0": ("method=vict", "run.updates=3", "run.keep_rollouts=2",
                           "run.credit_check_every=2"),
            "adrs_seed0": ("method=adrs", "run.updates=2", f"skills.root={skills_root}",
                           "eval.probes=0")}
    for name, extra in runs.items():
        config = load_config(None, [*tiny_fake_run, *REPORT_RUN, f"run.output_dir={root}",
                                    f"run.name={name}", *extra])
        train(config, echo=lambda _: None)
    return root


def _play(env, task, actions):
    """Run ``actions`` from reset, stopping when the episode ends.

    Returns (observations, snapshots, step results): index 0 of the first two is
    after reset; each step result is ``(reward, done, info)``.
    """
    obs = env.reset(task)
    texts, states, results = [obs.text], [env.snapshot()], []
    for action in actions:
        obs, reward, done, info = env.step(action)
        texts.append(obs.text)
        states.append(env.snapshot())
        results.append((reward, done, info))
        if done:
            break
    return texts, states, results


@pytest.fixture(scope="session")
def play():
    """``play(env, task, actions)`` -> (observations, snapshots, step results)."""
    return _play


@pytest.fixture
def fake_env() -> FakeEnv:
    return FakeEnv()


@pytest.fixture(scope="session")
def make_fake_task():
    """``fake_task(split, index)``: a task of the fake corridor environment."""
    return fake_task


FAKE_TEXTS = [
    system_message("bare"),
    "Your task is to: take the apple",
    "Recent steps:\nObservation: You are in room 0. The room is empty.\nAction: go right",
    ("Current observation: You are in room 1. You see an apple.\nAdmissible actions:\n"
     "go left\ngo right\ntake apple"),
    "You take the apple.",
    "Nothing happens.",
    "<action>go left</action> <think>the apple</think>",
] * 3


@pytest.fixture(scope="session")
def fake_tokenizer():
    return train_bpe_tokenizer(FAKE_TEXTS, vocab_size=512)


@pytest.fixture(scope="session")
def fake_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = TinyModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                             num_key_value_heads=1, intermediate_size=64,
                             max_position_embeddings=512, seed=0)
    return bootstrap_tiny_model(FAKE_TEXTS, tmp_path_factory.mktemp("fake_tiny"), config)


# Tests that play the real ALFWorld engine (Fast Downward builds and plans every game) take
# seconds to a minute each: they are `slow`, outside the `pytest -m "not slow"` inner loop.
ENGINE_TESTS = ("tests/envs/alfworld/", "tests/rollout/test_collector_alfworld.py")


def pytest_collection_modifyitems(config, items) -> None:
    """Mark the engine tests ``engine`` and ``slow``."""
    for item in items:
        if any(path in item.nodeid for path in ENGINE_TESTS):
            item.add_marker(pytest.mark.engine)
            item.add_marker(pytest.mark.slow)
