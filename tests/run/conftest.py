"""What the resume tests of ``tests/run/`` share: a stopped tiny run, its resume, and the
uninterrupted run (``full``) a resumed one must match, timings aside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentcredit.config import load_config
from agentcredit.train.loop import train

RUN = ("run.updates=4", "run.checkpoint_every=1", "run.keep_checkpoints=3", "run.eval_every=2",
       "credit.estimator=vict")


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _without_timings(records: list[dict]) -> list[dict]:
    timing = ("time/", "tokens/", "sft/seconds")
    return [{k: v for k, v in r.items() if not k.startswith(timing) and not k.endswith("_ms")}
            for r in records]


@pytest.fixture(scope="module")
def full(tmp_path_factory, tiny_fake_run):
    """An uninterrupted 4-update VICT run on the fake environment."""
    root = tmp_path_factory.mktemp("full")
    config = load_config(None, [*tiny_fake_run, *RUN, f"run.output_dir={root}", "run.name=full"])
    train(config, echo=lambda _: None)
    return config.run_dir


def _stopped(tmp_path: Path, tiny_fake_run, name: str, after: int):
    config = load_config(None, [*tiny_fake_run, *RUN, f"run.output_dir={tmp_path}",
                                f"run.name={name}"])
    train(config, stop_after_update=after, echo=lambda _: None)
    return config


def _resume(config) -> list[str]:
    said = []
    train(config, resume=True, echo=said.append)
    return said
