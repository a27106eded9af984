"""credit-check's sizes are range-checked and its bootstrap memory estimated before anything
is collected: one error line each, through the CLI (train/evaluation/credit_accuracy/check.py)."""

from __future__ import annotations

import pytest

from agentcredit.cli import main


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
