"""credit-check's sizes are range-checked and its bootstrap memory estimated before anything
is collected: one error line each, through the CLI (train/evaluation/credit_check/check.py)."""

from __future__ import annotations

import pytest

from agentcredit.cli import main
from agentcredit.config import load_config
from agentcredit.train.evaluation.credit_check import check
from agentcredit.train.evaluation.credit_check.check import (
    OPTION_RANGES,
    CreditCheckOptions,
    memory_estimate,
)


@pytest.mark.parametrize("flag, value, message", [
    ("--groups", "1000000000", "groups = 1000000000; it must be from 1 to 10,000"),
    ("--tie-breaks", "1000000000", "tie_breaks = 1000000000; it must be from 0 to 1,000"),
    ("--continuations", "1000000", "continuations = 1000000; it must be from 2 to 1,000"),
    ("--boots", "10000000000", "boots = 10000000000; it must be from 1 to 1,000,000"),
    # 1,000,000 draws of 10,000 groups: 8e10 bytes, 74.5 GiB, over the 1 GiB allowed
    ("--groups=10000 --boots", "1000000", "boots = 1000000 draws of 10000 groups need 74.5 GiB"),
])
def test_a_size_past_its_range_is_one_error_line_before_anything_runs(tmp_path, capsys, flag,
                                                                      value, message):
    args = [*flag.split(" ")[:-1], *flag.split(" ")[-1:], value]
    code = main(["credit-check", "--checkpoint", str(tmp_path / "nowhere"), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith(f"error: credit check: {message}")


def test_the_memory_estimate_is_the_hand_worked_sum():
    config = load_config(None, [])  # 8 rollouts a group, 30 steps, 1,536 + 16 tokens a row
    options = CreditCheckOptions(groups=100, mc_groups=0, continuations=1000)
    # a group: 8 x 30 = 240 rows of 1,552 tokens x 32 bytes = 11,919,360 bytes; 240 states
    # x 1,000 continuations x 72 bytes = 17,280,000 bytes under Monte Carlo
    assert memory_estimate(options, config) == {"rollouts": 100 * 11_919_360.0,
                                                "mc": 100 * 17_280_000.0}
    only_four = CreditCheckOptions(groups=100, mc_groups=4, continuations=1000)
    assert memory_estimate(only_four, config)["mc"] == 4 * 17_280_000.0
    solver_only = CreditCheckOptions(groups=100, truths=["solver"])
    assert memory_estimate(solver_only, config)["mc"] == 0.0


def test_the_largest_groups_allowed_can_pass_a_machines_memory():
    # so the ranges alone do not keep a check within memory: it is estimated before collecting
    biggest = CreditCheckOptions(groups=OPTION_RANGES["groups"][1], mc_groups=0,
                                 continuations=OPTION_RANGES["continuations"][1])
    assert sum(memory_estimate(biggest, load_config(None, [])).values()) > 256 << 30  # 272 GiB


@pytest.mark.parametrize("args, message", [
    (["--groups", "10000", "--truths", "solver"],
     ("10000 groups need about 111.0 GiB of memory (rollouts 111.0, Monte Carlo 0.0 GiB) and "
      "this machine has 16.0 GiB; lower --groups 10000 (or rollout.group_size, "
      "rollout.max_steps)")),
    (["--groups", "100", "--mc-groups", "0", "--continuations", "1000"],
     ("100 groups need about 2.7 GiB of memory (rollouts 1.1, Monte Carlo 1.6 GiB) and this "
      "machine has 2.0 GiB; lower --continuations 1000 or --mc-groups 0 (the groups the Monte "
      "Carlo truth covers; 0: all) (or rollout.group_size, rollout.max_steps)")),
])
def test_groups_whose_rollouts_do_not_fit_are_one_error_line_before_anything_is_collected(
        tmp_path, capsys, monkeypatch, args, message):
    memory = 16 << 30 if "10000" in args else 2 << 30
    monkeypatch.setattr(check, "machine_memory", lambda: memory)
    monkeypatch.setattr(check, "load_model", _never)
    (tmp_path / "config.json").write_text("{}")  # a model folder, never read
    code = main(["credit-check", "--checkpoint", str(tmp_path), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == f"error: credit check: {message}"


def _never(*args, **kwargs):
    raise AssertionError("the model was loaded: the check ran past its memory estimate")
