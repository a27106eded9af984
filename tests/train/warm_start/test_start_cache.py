"""The start cache (train/warm_start/start_cache.py): its key moves with every input of the
embedded start and with nothing else, a second run reads the start back and trains exactly as
the first, and a changed setting trains a new start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from agentcredit.config import load_config
from agentcredit.envs.base import Task
from agentcredit.train.loop import train
from agentcredit.train.warm_start import start_cache
from agentcredit.train.warm_start.start_cache import StartCache, start_inputs, start_key

TASKS = [Task(task_id=f"game{i}", env="alfworld", split="train", instruction=f"put {i} away",
              task_type="pick", payload={}) for i in range(3)]


def key(*overrides: str, tasks=TASKS, skills=("guide",)) -> str:
    return start_key(start_inputs(load_config(None, list(overrides)), tasks, list(skills)))


@pytest.mark.parametrize("override", [
    "sft.lr=0.002", "sft.epochs=5", "sft.batch_size=8", "sft.demonstrations_per_task=3",
    "sft.demonstration_noise=0.3", "sft.skill_share=0.5", "sft.recovery=0.2",
    "model.tiny.hidden_size=48", "model.tiny.seed=3", "model.tokenizer_games_per_type=2",
    "rollout.history_window=3", "rollout.history_style=pairs", "rollout.decoding=free",
    "rollout.action_format=tagged", "rollout.max_prompt_tokens=512", "run.seed=1",
    "run.threads=3", "env.train_games_per_type=7", "env.alfworld.generator.max_receptacles=6",
    "env=webshop"])
def test_a_setting_that_shapes_the_start_changes_its_key(override):
    assert key(override) != key()


@pytest.mark.parametrize("override", [
    "optim.lr=0.1", "run.updates=3", "credit.estimator=rloo", "env.pool_games_per_type=2",
    "env.valid_games_per_type=2", "eval.pool_episodes_per_game=9", "rollout.group_size=4",
    "rollout.temperature=1.0", "env.alfworld.cache_dir=/elsewhere", "sft.cache_dir=/elsewhere",
    "run.name=another"])
def test_a_setting_that_only_shapes_rl_or_says_where_files_lie_keeps_the_key(override):
    assert key(override) == key()


def test_the_train_games_the_skill_texts_and_the_code_enter_the_key(tmp_path, monkeypatch):
    assert key(tasks=TASKS[:2]) != key()
    assert key(tasks=[TASKS[0], TASKS[2], TASKS[1]]) != key()
    assert key(skills=("another guide",)) != key()
    package = tmp_path / "agentcredit"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "sft.py").write_text("EPOCHS = 1\n")
    monkeypatch.setattr(start_cache.agentcredit, "__file__", str(package / "__init__.py"))
    before = key()
    (package / "sft.py").write_text("EPOCHS = 2\n")
    assert key() != before


@pytest.fixture(scope="module")
def cached_runs(tiny_fake_run, tmp_path_factory):
    """Three runs sharing one cache: ``first`` trains and stores the start, ``second`` (the
    same settings) reads it back, ``third`` changes the SFT learning rate. Each run's stderr
    is kept."""
    root = tmp_path_factory.mktemp("cached")
    cache = root / "starts"
    settings = [*tiny_fake_run, "sft.cache=true", f"sft.cache_dir={cache}",
                f"run.output_dir={root}", "run.updates=1", "sft.epochs=4", "sft.batch_size=4",
                "rollout.group_size=3", "rollout.tasks_per_update=2"]
    return root, cache, settings


def _train(settings, name, capsys, *extra):
    capsys.readouterr()
    train(load_config(None, [*settings, f"run.name={name}", *extra]), echo=lambda _: None)
    return capsys.readouterr().err


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _untimed(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "tokens/", "sft/seconds",
                                                               "sft/reused"))}
            for r in records]


def test_a_second_run_reuses_the_start_says_so_and_trains_exactly_as_the_first(cached_runs,
                                                                              capsys):
    root, cache, settings = cached_runs
    assert "reused" not in _train(settings, "first", capsys)
    [entry] = [p for p in cache.iterdir()]
    said = _train(settings, "second", capsys)
    assert "warm start: reused the tokenizer, model and SFT" in said and str(entry) in said
    assert "sft.cache=false" in said
    first, second = _records(root / "first"), _records(root / "second")
    assert _untimed(first) == _untimed(second)
    sft = next(r for r in second if r["kind"] == "sft")
    assert sft["sft/reused"] == 1.0 and "sft/reused" not in next(r for r in first
                                                                  if r["kind"] == "sft")
    weights = [load_file(root / run / "reference" / "model.safetensors")
               for run in ("first", "second")]
    assert all(weights[0][k].equal(weights[1][k]) for k in weights[0])
    assert not (root / "second" / "init_model").exists()  # nothing was bootstrapped


def test_a_changed_sft_setting_trains_and_stores_a_new_start(cached_runs, capsys):
    root, cache, settings = cached_runs
    assert "reused" not in _train(settings, "third", capsys, "sft.lr=0.02")
    assert len(list(cache.iterdir())) == 2
    weights = [load_file(root / run / "reference" / "model.safetensors")
               for run in ("first", "third")]
    assert not all(weights[0][k].equal(weights[1][k]) for k in weights[0])


def test_no_cache_trains_every_time_and_stores_nothing(cached_runs, capsys, tmp_path):
    _, _, settings = cached_runs
    elsewhere = tmp_path / "unused"
    assert "reused" not in _train([*settings, f"sft.cache_dir={elsewhere}"], "uncached", capsys,
                                  "sft.cache=false")
    assert not elsewhere.exists()


def test_an_incomplete_entry_is_never_read_and_is_replaced(tmp_path):
    inputs = {"format": 1, "what": "a start"}
    reference = tmp_path / "reference"
    reference.mkdir()
    for name in start_cache.REFERENCE_FILES:
        (reference / name).write_text(name)
    cache = StartCache(tmp_path / "starts")
    entry = cache.store(inputs, reference, {"kind": "sft"})
    assert cache.find(inputs) == entry and entry.sft_record() == {"kind": "sft"}
    assert cache.find({**inputs, "what": "another"}) is None
    (entry.reference / "model.safetensors").unlink()
    assert cache.find(inputs) is None
    assert cache.store(inputs, reference, {"kind": "sft"}) == entry
    assert cache.find(inputs) == entry
    (entry.folder / "inputs.json").write_text(json.dumps({"format": 1, "what": "forged"}))
    assert cache.find(inputs) is None
