"""The warm start's demonstration settings per environment (train/warm_start/start_policy.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from tests.conftest import FakeSuite

from agentcredit.config import load_config
from agentcredit.envs.alfworld.options import AlfWorldConfig, GeneratorConfig
from agentcredit.envs.suites import GamesPerType, build_env_suite
from agentcredit.train.warm_start import start_policy
from agentcredit.train.warm_start.start_policy import demonstration_settings, play_demonstrations


class _Plain:
    """An environment whose expert cannot label noisy episodes."""


class _Labelling:
    def labelled_demonstration(self, task, rng, noise):
        raise AssertionError("not played here")


def test_noisy_repeated_demonstrations_apply_where_the_demonstrator_labels():
    config = load_config(None, ["sft.demonstration_noise=0.3", "sft.demonstrations_per_task=3"])
    assert demonstration_settings(config, _Labelling()) == (3, 0.3, None)


def test_other_environments_play_one_clean_demonstration_and_name_the_missing_hook():
    config = load_config(None, ["env=webshop", "sft.demonstration_noise=0.3",
                                "sft.demonstrations_per_task=3"])
    copies, noise, note = demonstration_settings(config, _Plain())
    assert (copies, noise) == (1, 0.0)
    assert "sft.demonstration_noise = 0.3" in note and "webshop" in note
    assert "labelled_demonstration(task, rng, noise)" in note
    assert "docs/extending.md, Demonstrations for the warm start" in note


def test_the_note_points_at_a_subsection_that_exists():
    doc = (Path(__file__).resolve().parents[3] / "docs" / "extending.md").read_text()
    assert "\n### Demonstrations for the warm start\n" in doc


def test_clean_single_demonstrations_need_no_note_anywhere():
    config = load_config(None, ["env=webshop", "sft.demonstration_noise=0",
                                "sft.demonstrations_per_task=1"])
    assert demonstration_settings(config, _Plain()) == (1, 0.0, None)


@pytest.mark.slow
def test_demonstrations_played_by_worker_processes_equal_those_played_here(tmp_path):
    # on generated ALFWorld games: spawned workers rebuild the suite from its pickle, which a
    # test-only suite cannot offer (a site package named ``tests`` shadows this folder there)
    options = AlfWorldConfig(generator=GeneratorConfig(seed=7, max_receptacles=12),
                             cache_dir=str(tmp_path))
    suite = build_env_suite("alfworld", options, GamesPerType(train=1, valid=1))
    tasks = suite.tasks("train")
    here = play_demonstrations(suite, tasks, 2, 0.3, seed=3, workers=1)
    assert [d.task for d in here] == [task for task in tasks for _ in range(2)]
    assert play_demonstrations(suite, tasks, 2, 0.3, seed=3, workers=2) == here


def test_a_daemon_process_plays_its_demonstrations_itself(monkeypatch):
    """A ``multiprocessing.Pool`` worker is a daemon and may start no process (the learning
    benchmark trains its SFT starts in one): enough tasks for workers are played here."""
    suite = FakeSuite(games=GamesPerType(train=start_policy.PARALLEL_TASKS // 2, valid=1))
    tasks = suite.tasks("train")
    assert len(tasks) >= start_policy.PARALLEL_TASKS
    here = play_demonstrations(suite, tasks, 1, 0.0, seed=0, workers=1)

    def no_children(*args, **kwargs):
        raise AssertionError("daemonic processes are not allowed to have children")

    monkeypatch.setattr(start_policy, "ProcessPoolExecutor", no_children)
    monkeypatch.setattr(start_policy.multiprocessing, "current_process",
                        lambda: SimpleNamespace(daemon=True))
    assert play_demonstrations(suite, tasks, 1, 0.0, seed=0) == here
