"""``run.save_rollouts``: each saved update holds the rollouts as they were credited, bounded on
disk (``run/saved_rollouts.py``)."""

from __future__ import annotations

import gzip
import json

import pytest
import torch

from agentcredit.config import ConfigError, load_config
from agentcredit.credit import CreditBatch, CreditResult
from agentcredit.jsonl_log import read_jsonl
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.run.saved_rollouts import (
    TEXT_LIMIT,
    read_saved_rollouts,
    save_rollouts,
    saved_updates,
)
from agentcredit.train.loop import train


def test_the_trainer_keeps_only_the_newest_saved_updates_compressed(report_runs):
    saved = saved_updates(report_runs / "vict_seed0" / "rollouts")
    assert [u for u, _ in saved] == [2, 3]  # 3 updates saved, run.keep_rollouts=2
    for _, path in saved:
        raw = gzip.decompress(path.read_bytes())
        assert len(path.read_bytes()) < len(raw) / 3
    assert not list((report_runs / "vict_seed0" / "rollouts").glob(".*"))  # no temporary file


def test_a_saved_vict_update_holds_each_steps_base_correction_edges_and_ledger_rows(report_runs):
    run = report_runs / "vict_seed0"
    ledger = list(read_jsonl(run / "ledger.jsonl"))
    for update, path in saved_updates(run / "rollouts"):
        record = read_saved_rollouts(path)
        assert record["update"] == update and record["estimator"] == "vict"
        assert {"base_advantage", "correction", "vict_advantage"} <= set(record["step_fields"])
        rows = []
        for rollout in record["rollouts"]:
            trace = rollout["trace"]
            assert len(trace["statuses"]) == len(rollout["steps"]) + 1
            for t, step in enumerate(rollout["steps"]):
                values = step["values"]  # A^final = A^base + correction, per step
                assert step["advantage"] == pytest.approx(
                    values["base_advantage"] + values["correction"], abs=1e-4)
                assert all(e["step"] < len(rollout["steps"]) for e in trace["edges"])
                rows += [(rollout["rollout"], t, r["atom_id"], r["atom_credit"])
                         for r in step["ledger"]]
        logged = [(r["rollout"], r["step"], r["atom_id"], round(r["atom_credit"], 5))
                  for r in ledger if r["update"] == update]
        assert sorted(rows) == sorted(logged)
    assert ledger, "the fixture's VICT run should have credited some steps"


def test_a_saved_adrs_update_holds_every_response_tokens_teacher_scores(report_runs):
    for _, path in saved_updates(report_runs / "adrs_seed0" / "rollouts"):
        record = read_saved_rollouts(path)
        assert {"teacher_logprob", "behaviour_logprob", "token_advantage",
                "teacher_reward"} <= set(record["token_fields"])
        for rollout in record["rollouts"]:
            assert rollout["trace"] is None
            for step in rollout["steps"]:
                tokens = step["tokens"]
                assert tokens["text"] and "".join(tokens["text"]).startswith(
                    step["response"][:2])
                assert all(len(tokens[f]) == len(tokens["text"])
                           for f in record["token_fields"])


def test_a_damaged_saved_update_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "update_00001.json.gz"
    path.write_bytes(gzip.compress(b'{"format": 1, "upd')[:-6])
    with pytest.raises(ValueError, match="update_00001.json.gz is damaged"):
        read_saved_rollouts(path)
    path.write_bytes(gzip.compress(json.dumps({"format": 99}).encode()))
    with pytest.raises(ValueError, match="format 99"):
        read_saved_rollouts(path)


def test_long_texts_are_cut_to_the_limit_and_non_finite_values_saved_as_null(tmp_path,
                                                                             make_fake_task):
    step = Step(observation="x" * (TEXT_LIMIT + 50), response="go right", action="go right",
                valid=True, reward=0.0, anchor_key="", snapshot={}, prompt_ids=[1],
                response_ids=[2], sampling_logprobs=[-0.1])
    trajectory = Trajectory(task=make_fake_task("train", 0), group_id=0, steps=[step])
    batch = CreditBatch.from_lists([[0.0]], [0])
    credit = CreditResult(step_advantages=torch.tensor([float("nan")]),
                          extras={"base_advantage": torch.tensor([0.5])})
    path = save_rollouts(tmp_path, 7, "grpo", [trajectory], batch, credit, None, keep=1)
    saved = read_saved_rollouts(path)["rollouts"][0]["steps"][0]
    assert saved["observation"].startswith("x" * TEXT_LIMIT)
    assert saved["observation"].endswith("[50 characters cut]")
    assert saved["advantage"] is None and saved["values"] == {"base_advantage": 0.5}


def test_a_credit_checked_update_saves_each_steps_truth_beside_its_credit(tmp_path,
                                                                          make_fake_task):
    steps = [Step(observation="o", response=a, action=a, valid=True, reward=0.0, anchor_key="",
                  snapshot={}, prompt_ids=[1], response_ids=[2], sampling_logprobs=[-0.1])
             for a in ("go right", "take apple")]
    trajectory = Trajectory(task=make_fake_task("train", 0), group_id=0, steps=steps)
    batch = CreditBatch.from_lists([[0.0, 1.0]], [0])
    credit = CreditResult(step_advantages=torch.tensor([0.25, 0.5]))
    checked = read_saved_rollouts(save_rollouts(tmp_path, 2, "grpo", [trajectory], batch, credit,
                                                None, keep=2, truth=[-2.0, float("nan")]))
    assert checked["truth"] == "solver"
    assert [(s["advantage"], s["truth"]) for s in checked["rollouts"][0]["steps"]] == [
        (0.25, -2.0), (0.5, None)]
    plain = read_saved_rollouts(save_rollouts(tmp_path, 3, "grpo", [trajectory], batch, credit,
                                              None, keep=2))
    assert plain["truth"] is None
    assert not any("truth" in s for s in plain["rollouts"][0]["steps"])


def test_the_trainer_saves_the_truth_only_with_an_update_it_credit_checked(report_runs):
    # the VICT run checks every 2nd update and saves updates 2 and 3
    (_, checked), (_, plain) = saved_updates(report_runs / "vict_seed0" / "rollouts")
    assert read_saved_rollouts(plain)["truth"] is None
    record = read_saved_rollouts(checked)
    assert record["truth"] == "solver"
    # in the corridor g_t is 0 for a step towards the apple or the take, -2 for a step away
    # and -1 for an invalid action (it changes nothing)
    steps = [s for r in record["rollouts"] for s in r["steps"]]
    assert all((s["truth"] == -1.0) == (not s["valid"]) for s in steps)
    assert {s["truth"] for s in steps if s["valid"]} <= {0.0, -2.0}


@pytest.mark.parametrize("setting", ["run.save_rollouts=-1", "run.keep_rollouts=0"])
def test_a_negative_save_interval_or_an_empty_keep_is_refused_by_name(setting):
    key = setting.split("=")[0]
    with pytest.raises(ConfigError, match=f"{key} = .* out of range"):
        load_config(None, [setting])


@pytest.mark.parametrize(("every", "updates", "saved", "warned"),
                         [(2, 3, [2, 3], False), (5, 2, [2], True)])
def test_the_last_update_is_always_saved_and_an_interval_beyond_the_run_is_warned_of(
        tiny_fake_run, tmp_path, every, updates, saved, warned):
    config = load_config(None, [*tiny_fake_run, "sft.enabled=false", "run.eval_at_start=false",
                                f"run.output_dir={tmp_path}", f"run.updates={updates}",
                                f"run.save_rollouts={every}", "rollout.group_size=2",
                                "rollout.tasks_per_update=1"])
    lines = []
    train(config, echo=lines.append)
    assert [u for u, _ in saved_updates(tmp_path / "embedded" / "rollouts")] == saved
    warning = ("warning: run.save_rollouts = 5 is more than run.updates = 2: only the last "
               "update's rollouts are saved (run.save_rollouts=1 saves every update)")
    assert [line for line in lines if line.startswith("warning:")] == ([warning] if warned
                                                                       else [])
