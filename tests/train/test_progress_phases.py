"""Every long phase of ``agentcredit train`` shows a progress bar on stderr (issue 12 item 6),
and ``run.progress=false`` silences them all."""

from __future__ import annotations

from transformers.utils import logging as hf_logging

from agentcredit import progress
from agentcredit.config import load_config
from agentcredit.envs.alfworld import generator
from agentcredit.envs.alfworld.options import GeneratorConfig
from agentcredit.envs.base import Task
from agentcredit.progress import reporting
from agentcredit.train.loop import train

SHORT = ("run.updates=2", "run.eval_every=1", "run.checkpoint_every=2", "sft.epochs=2")
PHASES = ("expert demonstrations: ", "SFT: ", "eval: ", "updates: ")


def _run(tmp_path, name, tiny_fake_run, *extra):
    config = load_config(None, [*tiny_fake_run, *SHORT, f"run.output_dir={tmp_path}",
                                f"run.name={name}", *extra])
    train(config, echo=lambda _: None)


def test_a_run_shows_each_phase_on_stderr_with_its_counts(tmp_path, tiny_fake_run, monkeypatch,
                                                          capsys):
    monkeypatch.setattr(progress, "DELAY_S", 0.0)  # the fake phases end within the delay
    _run(tmp_path, "shown", tiny_fake_run, "run.progress=true")
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    for label in PHASES:
        assert any(line.startswith(label) for line in lines), label
    assert not any(label in captured.out for label in PHASES)  # bars stay off stdout
    # three evaluations (start, after each update) of 1 game per type and split: 4 games
    assert sum(line.startswith("eval: 4/4 games in ") for line in lines) == 3
    assert any(line.startswith("updates: 2/2 updates in ") for line in lines)
    assert any(line.startswith("SFT: ") and "loss=" in line for line in lines)
    assert "Writing model shards" not in captured.err  # transformers' per-file bars stay hidden


def test_run_progress_false_prints_no_bar_and_restores_transformers_bars(
        tmp_path, tiny_fake_run, monkeypatch, capsys):
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    hf_logging.enable_progress_bar()  # whatever earlier tests left: the bars are on before
    with reporting(True):  # the run's own switch wins over an outer one
        _run(tmp_path, "quiet", tiny_fake_run, "run.progress=false")
    assert capsys.readouterr().err == ""
    assert hf_logging.is_progress_bar_enabled()


def test_game_generation_shows_a_bar_per_split(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(progress, "DELAY_S", 0.0)

    def made(split, task_type, index, config, cache_dir):
        return Task(task_id=f"{split}-{task_type}-{index}", env="alfworld", split=split,
                    instruction="", task_type=task_type, payload={})

    monkeypatch.setattr(generator, "generate_game", made)
    with reporting(True):
        games = generator.generate_split("valid_seen", 2, GeneratorConfig(), tmp_path, workers=1)
    lines = capsys.readouterr().err.splitlines()
    assert len(games) == 2 * len(generator.TASK_TYPES)
    assert lines[0].startswith(f"valid_seen games: 0/{len(games)} games")
    assert lines[-1].startswith(f"valid_seen games: {len(games)}/{len(games)} games in ")
