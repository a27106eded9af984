"""The VICT paper's baselines (issue 18) train end to end on the fake corridor: every new method
name, VICT on the step-level baselines, HCAPO's hindsight pass timed as its own phase, DAPO's
dynamic sampling training only on groups with signal."""

from __future__ import annotations

import json

import pytest

from agentcredit.config import load_config
from agentcredit.train.loop import train

RUN = (
    "run.updates=1", "run.eval_every=0", "run.checkpoint_every=1", "run.eval_at_start=false",
    "sft.epochs=20", "sft.batch_size=4", "sft.lr=0.01",
    "rollout.group_size=3", "rollout.tasks_per_update=2", "optim.lr=1e-3",
    "optim.micro_batch_size=4",
)


def _update_record(tiny_fake_run, tmp_path, *method: str) -> dict:
    config = load_config(None, [*tiny_fake_run, *RUN, f"run.output_dir={tmp_path}", *method])
    train(config, echo=lambda _: None)
    records = [json.loads(line) for line in
               (config.run_dir / "metrics.jsonl").read_text().splitlines()]
    (update,) = [r for r in records if r["kind"] == "update"]
    return update


@pytest.mark.parametrize("method, diagnostic", [
    (("method=salt",), "credit/shared_node_step_share"),
    (("method=hcapo",), "credit/ratio_clipped_share"),
    (("method=proxmo",), "credit/mean_episode_weight"),
    (("method=vict", "credit.options.backbone=salt"), "credit/base/shared_node_step_share"),
    (("method=vict", "credit.options.backbone=hcapo"), "credit/base/ratio_mean"),
], ids=lambda m: " ".join(m) if isinstance(m, tuple) else m)
def test_each_baseline_trains_and_logs_its_diagnostics(tiny_fake_run, tmp_path, method,
                                                       diagnostic):
    record = _update_record(tiny_fake_run, tmp_path, *method)
    assert diagnostic in record
    reads_hindsight = any("hcapo" in m for m in method)
    assert ("time/hindsight" in record) == reads_hindsight
    assert ("score/hindsight_row_share" in record) == reads_hindsight


def test_dapo_trains_only_on_groups_with_signal_unless_none_turned_up(tiny_fake_run, tmp_path):
    record = _update_record(tiny_fake_run, tmp_path, "method=dapo", "run.seed=3")
    assert {"dynamic/rounds", "dynamic/dropped_groups", "reward/overlong_step_share"} <= set(record)
    if not record["dynamic/empty"]:
        assert record["credit/zero_signal_group_share"] == 0.0
    assert record["rollout/steps"] > 0
