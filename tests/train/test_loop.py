"""The training loop on the fake corridor environment: run directory, metrics, checkpoints,
exact resumption, and starting from a saved checkpoint through ``model=DIR``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from agentcredit.config import load_config
from agentcredit.rollout.policy import PolicyDiverged
from agentcredit.run.directory import RunDirectory, RunDirectoryError
from agentcredit.run.saved_rollouts import read_saved_rollouts
from agentcredit.train.loop import train

LOOP_RUN = (
    "run.updates=3", "run.eval_every=1", "run.checkpoint_every=1",
    # enough SFT that some rollouts win and some fail, so GRPO has a signal to learn from
    "sft.epochs=40", "sft.batch_size=4", "sft.lr=0.01",
    "rollout.group_size=3", "rollout.tasks_per_update=2",
    "optim.lr=1e-3", "optim.mini_batches=2", "optim.micro_batch_size=4",
)


def latest_checkpoint(run_dir: Path) -> Path:
    """The run's newest complete checkpoint folder."""
    return RunDirectory(run_dir).latest_checkpoint()


@pytest.fixture(scope="session")
def tiny_config(tiny_fake_run):
    """``tiny_config(root, name, *extra)``: the 3-update tiny run's config in ``root/name``."""
    def make(root: Path, name: str, *extra: str):
        return load_config(None, [*tiny_fake_run, *LOOP_RUN, f"run.output_dir={root}",
                                  f"run.name={name}", *extra])
    return make


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def without_timings(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not (k.startswith(("time/", "tokens/", "sft/seconds")))}
            for r in records]


#: what the uninterrupted run printed
ECHOED: list[str] = []


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, tiny_config):
    root = tmp_path_factory.mktemp("runs")
    result = train(tiny_config(root, "full"), echo=ECHOED.append)
    return root, result


def test_a_run_writes_config_metrics_and_checkpoints(uninterrupted):
    _, result = uninterrupted
    run_dir = result.run_dir
    assert (run_dir / "config.yaml").is_file() and (run_dir / "reference" / "config.json").is_file()
    records = read_metrics(run_dir)
    kinds = [(r["kind"], r["update"]) for r in records]
    assert kinds == [("sft", 0), ("eval", 0), ("update", 1), ("eval", 1), ("update", 2),
                     ("eval", 2), ("update", 3), ("eval", 3)]
    update = records[2]
    for key in ("rollout/reward", "rollout/success", "rollout/invalid_rate",
                "rollout/episode_length", "ppo/kl", "ppo/clip_frac", "ppo/entropy",
                "ppo/grad_norm", "tokens/generated_per_s", "tokens/trained_per_s",
                "time/rollout", "time/score", "time/credit", "time/update"):
        assert key in update, key
    # the layout every pass ran: said once, and logged with every update
    assert ECHOED.count("layout: prefix trees") == 1
    assert [r["score/trees"] for r in records if r["kind"] == "update"] == [1.0, 1.0, 1.0]
    evaluation = records[1]
    assert {"eval/success", "eval/valid_seen/success", "eval/valid_unseen/success",
            "eval/valid_seen/success/type0", "eval/valid_unseen/success/type1"} <= set(evaluation)
    assert result.success_start == evaluation["eval/success"]
    assert result.success_end == records[-1]["eval/success"]
    # keep_checkpoints=2 prunes the oldest
    assert [p.name for p in sorted((run_dir / "checkpoints").iterdir())] == [
        "update_00002", "update_00003"]


def test_a_killed_and_resumed_run_matches_the_uninterrupted_run(uninterrupted, tiny_config):
    root, full = uninterrupted
    config = tiny_config(root, "killed")
    stopped = train(config, stop_after_update=2, echo=lambda _: None)
    assert stopped.updates_done == 2
    # the "kill" left a torn line after the checkpoint: resuming must drop it
    with (stopped.run_dir / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"kind": "update", "update": 3, "rollout/reward": -1.0}) + "\n")
    resumed = train(config, resume=True, echo=lambda _: None)
    assert resumed.updates_done == 3
    last_update = [r for r in read_metrics(resumed.run_dir) if r["kind"] == "update"][-1]
    assert last_update["ppo/grad_norm"] > 0  # the resumed update really trained
    assert without_timings(read_metrics(resumed.run_dir)) == without_timings(
        read_metrics(full.run_dir))
    final_full = load_file(latest_checkpoint(full.run_dir) / "policy" / "model.safetensors")
    final_resumed = load_file(latest_checkpoint(resumed.run_dir) / "policy" / "model.safetensors")
    assert all(torch.equal(final_full[k], final_resumed[k]) for k in final_full)


def test_an_existing_run_directory_is_not_overwritten(uninterrupted, tiny_config):
    root, _ = uninterrupted
    with pytest.raises(RunDirectoryError, match="--resume"):
        train(tiny_config(root, "full"), echo=lambda _: None)


def test_a_saved_tiny_checkpoint_trains_through_model_equals_dir(uninterrupted, tmp_path,
                                                                  tiny_config):
    _, full = uninterrupted
    policy_dir = latest_checkpoint(full.run_dir) / "policy"
    config = tiny_config(tmp_path, "from_checkpoint", f"model={policy_dir}", "sft.enabled=false",
                         "run.updates=1", "run.eval_at_start=false")
    result = train(config, echo=lambda _: None)
    saved = load_file(policy_dir / "model.safetensors")
    start = load_file(result.run_dir / "reference" / "model.safetensors")
    assert all(torch.equal(saved[k], start[k]) for k in saved)  # RL started from DIR
    assert result.success_start is None and result.updates_done == 1


@pytest.mark.parametrize("estimator", ["rloo", "gigpo"])
def test_every_backbone_plugs_into_the_loop(estimator, tmp_path, tiny_config):
    config = tiny_config(tmp_path, estimator, f"credit.estimator={estimator}", "run.updates=1",
                         "run.eval_every=0", "run.eval_at_start=false", "run.save_rollouts=1")
    train(config, echo=lambda _: None)
    (update,) = [r for r in read_metrics(config.run_dir) if r["kind"] == "update"]
    # the logged credit is the estimator's on the saved rollouts, and it has a signal
    saved = read_saved_rollouts(RunDirectory(config.run_dir).rollouts / "update_00001.json.gz")
    assert saved["estimator"] == estimator
    step_advantages = [s["advantage"] for r in saved["rollouts"] for s in r["steps"]]
    assert update["advantage/mean_abs"] == pytest.approx(
        sum(abs(a) for a in step_advantages) / len(step_advantages), rel=1e-5)
    assert update["advantage/mean_abs"] > 0 and update["ppo/grad_norm"] > 0


@pytest.mark.parametrize("estimator", ["vict", "no_proof_edges"])
def test_vict_runs_in_the_loop_with_traces_and_a_ledger(estimator, tmp_path, tiny_config):
    # four groups of four: with these seeds update 2 has VICT corrections (ledger rows)
    config = tiny_config(tmp_path, estimator, f"credit.estimator={estimator}",
                         "run.updates=2", "run.eval_every=0", "run.eval_at_start=false",
                         "rollout.group_size=4", "rollout.tasks_per_update=4")
    train(config, echo=lambda _: None)
    updates = [r for r in read_metrics(config.run_dir) if r["kind"] == "update"]
    assert len(updates) == 2
    passes = [u["credit/vict/eligibility_pass_pct"] for u in updates]
    if estimator == "vict":  # the controls break the invariant by design; VICT never may
        assert passes == [100.0, 100.0]
    assert "time/trace" in updates[0]
    rows = [json.loads(line) for line in (config.run_dir / "ledger.jsonl").read_text().splitlines()]
    assert rows, "no VICT correction in these rollouts: the ledger checks would hold on nothing"
    assert {r["update"] for r in rows} <= {1, 2}
    assert all(r["correction"] != 0.0 for r in rows)


def test_a_resumed_vict_run_drops_ledger_rows_written_after_the_checkpoint(tmp_path, tiny_config):
    config = tiny_config(tmp_path, "vict_resume", "credit.estimator=vict", "run.updates=2",
                         "run.checkpoint_every=1", "run.eval_every=0", "run.eval_at_start=false")
    train(config, echo=lambda _: None)
    ledger = config.run_dir / "ledger.jsonl"
    rows = ledger.read_text().splitlines()
    ledger.write_text("\n".join(rows) + "\n" + json.dumps({"update": 9, "step": 0}) + "\n")
    import shutil
    shutil.rmtree(latest_checkpoint(config.run_dir))  # as if killed before checkpoint 2
    train(config, resume=True, echo=lambda _: None)
    assert all(json.loads(line)["update"] <= 2 for line in ledger.read_text().splitlines())


@pytest.mark.parametrize("temperature", ["1.0", "0.5"])
def test_admissible_decoding_in_the_loop_plays_only_valid_actions_and_rescores_exactly(
        tmp_path, tiny_config, temperature):
    """Rescored log-probs equal the sampled ones at any rollout temperature, so the recorded
    ones can stand for PPO's old log-probs (``optim.recompute_old_logprobs=false``)."""
    config = tiny_config(tmp_path, f"admissible_{temperature}", "rollout.decoding=admissible",
                         "rollout.history_style=compact", "rollout.history_window=8",
                         "run.updates=2", "run.eval_every=0", f"rollout.temperature={temperature}",
                         "optim.recompute_old_logprobs=true", "optim.mini_batches=1")
    result = train(config, echo=lambda _: None)
    updates = [r for r in read_metrics(result.run_dir) if r["kind"] == "update"]
    assert len(updates) == 2
    for record in updates:
        assert record["rollout/invalid_rate"] == 0
        assert record["score/sampling_gap"] < 1e-5  # the sampler's p̃ is what PPO rescored
        # one optimiser step, taken after the update scored its batch with the same weights
        # at the same temperature: every ratio is exactly 1
        assert record["ppo/ratio_mean"] == pytest.approx(1.0, abs=1e-5)


def test_the_loops_evaluations_play_the_configured_episodes_per_game(tmp_path, tiny_config):
    """Two episodes on each of the fake suite's validation games: every game's digit in
    ``eval/<split>/won`` counts its wins out of 2, and success is their mean over episodes."""
    config = tiny_config(tmp_path, "twice", "run.updates=1", "eval.episodes_per_game=2")
    train(config, echo=lambda _: None)
    for evaluation in (r for r in read_metrics(config.run_dir) if r["kind"] == "eval"):
        assert evaluation["eval/episodes_per_game"] == 2.0
        won = "".join(evaluation[k] for k in sorted(evaluation) if k.endswith("/won"))
        assert set(won) <= {"0", "1", "2"}
        assert evaluation["eval/success"] == sum(map(int, won)) / (2 * len(won))


def test_a_learning_rate_that_blows_up_the_policy_is_one_error_naming_the_update(tmp_path,
                                                                                  tiny_fake_run):
    config = load_config(None, [*tiny_fake_run, "run.updates=3", "run.eval_every=1",
                                f"run.output_dir={tmp_path}", "run.name=diverged"])
    config.optim.lr = 1e6  # past optim.lr's range, refused at load: set after it
    with pytest.raises(PolicyDiverged) as diverged:
        train(config, echo=lambda _: None)
    assert str(diverged.value) == (
        "training diverged at update 1: the policy's next-token probabilities hold NaN: its "
        "weights have diverged; lower optim.lr (now 1e+06) and start again")


#: starts the embedded run in ``argv[1]`` without, then with, the credit check, stopping each
#: where its run is built (``run_state.setup``), and prints the check's modules loaded by then
START_UP = """
import sys
from agentcredit.config import load_config
from agentcredit.train import loop

class Started(Exception):
    pass

def started(*args, **kwargs):
    raise Started

loop.setup = started
for every in (0, 1):
    try:
        loop.train(load_config(None, [f"run.output_dir={sys.argv[1]}", f"run.name=every{every}",
                                      f"run.credit_check_every={every}"]), echo=print)
    except Started:
        pass
    print(every, sorted(name for name in sys.modules if ".credit_check" in name))
"""


def test_a_run_without_the_credit_check_never_loads_its_package(tmp_path):
    """A fresh process (other tests load the check): the start-up of a run without
    ``run.credit_check_every`` imports nothing of ``train/evaluation/credit_check/``; the same
    start-up with it does, so the check can fail."""
    lines = subprocess.run(
        [sys.executable, "-c", START_UP, str(tmp_path)], check=True, capture_output=True,
        text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).stdout
    without, with_check = lines.splitlines()[-2:]
    assert without == "0 []"
    assert "agentcredit.train.evaluation.credit_check.check" in with_check
