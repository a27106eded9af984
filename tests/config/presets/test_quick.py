"""The quick start (``config/presets/quick.yaml``): ``agentcredit train --config quick`` then
``agentcredit report`` on its run, in a fresh run directory, give a report whose rollout viewer
holds the run's saved updates. Tiny settings here; the preset's own timing is in the README."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentcredit.cli import main
from agentcredit.config import load_config

pytest.importorskip("alfworld")

#: the games every run of this checkout shares (the preset's ``env.alfworld.cache_dir``, from
#: the root)
GAMES = Path(__file__).parents[3] / ".cache" / "agentcredit" / "alfworld"
TINY = ("run.progress=false", "run.threads=1", "sft.cache=false", "run.updates=2",
        "env.train_games_per_type=1",
        "eval.splits=[valid_seen]", "sft.epochs=1", "rollout.tasks_per_update=2",
        "rollout.group_size=2", "rollout.max_steps=5", "model.tiny.hidden_size=32",
        "model.tiny.num_hidden_layers=1", "model.tiny.num_attention_heads=2",
        "model.tiny.num_key_value_heads=1", "model.tiny.intermediate_size=64",
        f"env.alfworld.cache_dir={GAMES}")


def test_the_quick_preset_trains_with_saved_rollouts_on_a_pool_with_mixed_groups():
    config = load_config("quick")
    assert config.run.name == "quick" and config.run.save_rollouts == 1
    assert config.run.save_rollouts <= config.run.updates  # every update saved, the last too
    assert config.env.name == "alfworld" and config.env.train_games_per_type == 4
    assert config.rollout.group_size >= 2 and config.sft.enabled


@pytest.mark.slow  # about 30 s on 2 cores: the tiny model on six ALFWorld games
def test_quick_start_then_report_gives_a_viewer_with_every_saved_update(tmp_path, capsys):
    runs = tmp_path / "runs"
    assert main(["train", "--config", "quick", f"run.output_dir={runs}", *TINY]) == 0
    assert f"run directory: {(runs / 'quick').resolve()}" in capsys.readouterr().out
    report = tmp_path / "report.html"
    assert main(["report", str(runs / "quick"), "-o", str(report)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {report} (1 run of 1 method, ")
    page = report.read_text()
    viewer = json.loads(page.split('<script type="application/json" id="report-viewer">')[1]
                        .split("</script>")[0])
    [run] = viewer["runs"]
    assert run["name"] == "quick" and [u["update"] for u in run["updates"]] == [1, 2]
    for update in run["updates"]:
        assert len(update["groups"]) == 2  # rollout.tasks_per_update
        assert all(len(g["rollouts"]) == 2 and g["rollouts"][0]["steps"]
                   for g in update["groups"])
    assert "No saved rollouts" not in page
