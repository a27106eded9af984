"""Live metrics (``run.tensorboard``, ``run.wandb``): every numeric field of every metrics line
mirrored at its update, ``metrics.jsonl`` unchanged, a missing package refused before the run
starts (``run/live_metrics.py``)."""

from __future__ import annotations

import importlib.machinery
import re
import sys
import types

import pytest

from agentcredit.config import ConfigError, RunConfig, load_config
from agentcredit.jsonl_log import read_jsonl
from agentcredit.run.live_metrics import LiveMetrics
from agentcredit.train.loop import train

RUN = ("run.updates=2", "run.eval_every=1", "run.checkpoint_every=2", "sft.epochs=5",
       "rollout.group_size=2", "rollout.tasks_per_update=2", "optim.mini_batches=1")


class FakeWandb(types.ModuleType):
    """The part of ``wandb`` the trainer uses, recording every call."""

    def __init__(self):
        super().__init__("wandb")
        self.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
        self.inits: list[dict] = []
        self.logged: list[tuple[dict, int]] = []
        self.finished = 0

    def init(self, **kwargs):
        self.inits.append(kwargs)
        return types.SimpleNamespace(
            log=lambda values, step: self.logged.append((values, step)),
            finish=lambda: setattr(self, "finished", self.finished + 1))


def test_a_run_mirrors_its_metrics_to_tensorboard_and_wandb(tiny_fake_run, tmp_path,
                                                            monkeypatch):
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator")
    wandb = FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    config = load_config(None, [*tiny_fake_run, *RUN, f"run.output_dir={tmp_path}",
                                "run.name=live", "run.tensorboard=true", "run.wandb=my-project"])
    train(config, echo=lambda _: None)
    records = list(read_jsonl(config.run_dir / "metrics.jsonl"))
    updates = [r for r in records if r["kind"] == "update"]

    events = event_accumulator.EventAccumulator(str(config.run_dir / "tensorboard"))
    events.Reload()
    shown = [(e.step, e.value) for e in events.Scalars("rollout/success")]
    assert shown == [(r["update"], pytest.approx(r["rollout/success"])) for r in updates]
    assert "eval/valid_seen/won" not in events.Tags()["scalars"]  # text, not a scalar

    assert [i["project"] for i in wandb.inits] == ["my-project"]
    assert wandb.inits[0]["name"] == "live" and wandb.inits[0]["config"]["run"]["wandb"]
    assert len(wandb.logged) == len(records) and wandb.finished == 1
    assert [step for _, step in wandb.logged] == [r["update"] for r in records]
    assert wandb.logged[-1][0]["eval/success"] == records[-1]["eval/success"]


def test_only_numeric_fields_are_sent_at_the_lines_update():
    sent = []
    live = LiveMetrics([(lambda values, step: sent.append((values, step)), lambda: None)])
    live.log({"kind": "eval", "update": 3, "eval/success": 0.5, "eval/valid/won": "0110",
              "ppo/kl": None, "flag": True, "count": 2})
    assert sent == [({"eval/success": 0.5, "count": 2.0}, 3)]


@pytest.mark.parametrize(("setting", "package", "fix"), [
    ({"tensorboard": True}, "tensorboard", "pip install 'agentcredit[tensorboard]'"),
    ({"wandb": "proj"}, "wandb", "pip install wandb"),
])
def test_a_sink_whose_package_is_missing_stops_the_run_naming_the_install(
        setting, package, fix, tiny_fake_run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, package, None)  # as if not installed
    with pytest.raises(ConfigError, match=f"needs the {package} package.*{re.escape(fix)}"):
        LiveMetrics.open(RunConfig(**setting), tmp_path, {}, 0)
    key = next(iter(setting))
    config = load_config(None, [*tiny_fake_run, *RUN, f"run.output_dir={tmp_path}",
                                "run.name=stopped", f"run.{key}={setting[key]}"])
    with pytest.raises(ConfigError, match=f"run.{key}"):
        train(config, echo=lambda _: None)
    assert not (config.run_dir / "metrics.jsonl").exists()  # stopped before anything ran
