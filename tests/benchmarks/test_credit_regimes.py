"""The credit-regimes benchmark's command line (groups and K per environment) and its picture."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from credit_regimes import (
    FIGURE_METHODS,
    GROUPS,
    cell_metrics,
    figure_svg,
    format_table12_vs_paper,
    main,
    per_env,
)


def test_groups_take_one_number_for_all_or_a_number_per_environment():
    assert per_env("8", GROUPS, "--groups") == dict.fromkeys(GROUPS, 8)
    chosen = per_env("alfworld=4,searchqa=512", GROUPS, "--groups")
    assert (chosen["alfworld"], chosen["searchqa"], chosen["webshop"]) == (
        4, 512, GROUPS["webshop"])
    with pytest.raises(SystemExit, match="'mars=3' is not env=N"):
        per_env("mars=3", GROUPS, "--groups")


@pytest.mark.parametrize(("argv", "says"), [
    (["--workers", "0"], "--workers 0: it must be at least 1"),
    (["--workers", "-1"], "--workers -1: it must be at least 1"),
    (["--groups", "0"], "--groups 0: it must be at least 1"),
    (["--groups", "alfworld=0"], "--groups 0: it must be at least 1"),
    (["--groups", "x"], "--groups 'x': not a number N, nor env=N,..."),
    (["--continuations", "1"], "--continuations 1: it must be at least 2"),
    (["--boots", "0"], "--boots 0: it must be at least 1"),
    (["--mc-groups", "-1"], "--mc-groups -1: it must be at least 0"),
])
def test_a_size_out_of_range_stops_before_any_cell_naming_the_flag(monkeypatch, argv, says):
    monkeypatch.setattr(sys, "argv", ["credit_regimes.py", *argv])
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == says  # run_script prints it as one error: line, status 2


def test_the_script_refuses_zero_workers_in_one_line_without_a_traceback():
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "credit_regimes.py"
    done = subprocess.run([sys.executable, str(script), "--workers", "0"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert (done.returncode, done.stderr, done.stdout) == (
        2, "error: --workers 0: it must be at least 1\n", "")


def _cell(env: str, success: float) -> dict:
    rows = [{"method": m, "truth": t, "metric": "pooled", "value": 0.2, "low": 0.1,
             "high": 0.3} for m in FIGURE_METHODS for t in ("mc", "solver")]
    return {"env": env, "success_rate": success, "rows": rows}


def test_the_picture_has_a_panel_per_environment_and_truth_and_a_point_per_method_and_cell():
    svg = ET.fromstring(figure_svg([_cell("searchqa", 0.9), _cell("searchqa", 0.3),
                                    _cell("webshop", 0.5)]))
    tags = [e.tag.rpartition("}")[2] for e in svg.iter()]
    assert tags.count("circle") == 3 * len(FIGURE_METHODS) * 2  # 3 cells, 2 truths
    assert tags.count("polyline") == 2 * len(FIGURE_METHODS) * 2  # 2 environments
    titles = [e.text for e in svg.iter() if e.tag.endswith("text")]
    assert "searchqa: pooled ρ vs mc truth" in titles
    assert "webshop: pooled ρ vs solver truth" in titles


def test_a_cells_metrics_carry_the_corrected_step_sign_agreement_and_the_numeric_table12():
    corrected = {"method": "vict", "truth": "mc", "steps": 4, "correction": 0.75,
                 "correction_low": 0.5, "correction_high": 1.0, "base": 0.25, "base_low": 0.0,
                 "base_high": 0.5, "diff": 0.5, "low": 0.0, "high": 1.0}
    cell = {"env": "webshop", "epsilon": 0.3, "success_rate": 0.5, "rows": [], "pairs": [],
            "corrected": [corrected],
            "table12": {"vict": {"trigger_pct": 60.0, "abstain_fact_top_reason": "no_edge"}}}
    metrics = cell_metrics(cell)
    key = "webshop/0.3/mc/corrected_sign/vict"
    assert metrics[f"{key}/steps"] == 4
    assert (metrics[f"{key}/correction"], metrics[f"{key}/base"]) == (0.75, 0.25)
    assert (metrics[f"{key}/diff"], metrics[f"{key}/diff.low"], metrics[f"{key}/diff.high"]) == (
        0.5, 0.0, 1.0)
    assert metrics["webshop/0.3/table12/trigger_pct"] == 60.0
    assert "webshop/0.3/table12/abstain_fact_top_reason" not in metrics  # a name, not a number


def test_table12_beside_the_papers_prints_ours_the_papers_and_the_ratio():
    side = {"alfworld": {"epsilon": 0.44, "success_rate": 0.83, "paper_success": 0.9235,
                         "ours": {"trigger_pct": 30.9, "abstain_fact_top_reason": "no_edge"},
                         "paper": {"trigger_pct": 61.8, "top_reason": "terminal-only fact"},
                         "ratio": {"trigger_pct": 0.5}}}
    lines = format_table12_vs_paper(side).splitlines()
    assert lines[0] == ("Table 12, alfworld: our cell ε=0.44 at 83% success, the paper's policy "
                        "at 92.3%")
    assert lines[2].split() == ["trigger_pct", "30.90", "61.80", "0.50"]
    assert lines[3].split("|")[1].strip() == "terminal-only fact"


def test_eps_keeps_only_the_named_cells_of_the_named_environments():
    from credit_regimes import GRIDS, chosen_epsilons

    chosen = chosen_epsilons("webshop=0.3/0.5", ["webshop", "searchqa"])
    assert chosen == {"webshop": (0.3, 0.5), "searchqa": GRIDS["searchqa"]}
    for bad in ("webshop=0.31", "alfworld=0.44", "webshop=x", "webshop"):
        with pytest.raises(SystemExit, match="--eps"):
            chosen_epsilons(bad, ["webshop", "searchqa"])


def test_more_workers_than_cores_stops_naming_the_cores(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr(sys, "argv", ["credit_regimes.py", "--workers", "3"])
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == "--workers 3: this machine has 2 cores; use at most 2"


def test_into_keeps_the_cells_it_does_not_replay_and_every_run_that_wrote_them(
        tmp_path, monkeypatch):
    import json

    import credit_regimes
    monkeypatch.setattr(credit_regimes, "RESULTS", tmp_path)
    cells = [{"env": "searchqa", "epsilon": 0.3}, {"env": "alfworld", "epsilon": 0.53},
             {"env": "alfworld", "epsilon": 0.62}]
    runs = [{"envs": "searchqa"}, {"envs": "alfworld"}]
    (tmp_path / "grid.json").write_text(json.dumps({"cells": cells, "config": {"runs": runs}}))
    kept, earlier = credit_regimes.earlier_cells("grid", [("alfworld", 0.62), ("alfworld", 0.44)])
    assert kept == cells[:2] and earlier == runs
    (tmp_path / "one.json").write_text(json.dumps({"cells": cells, "config": {"envs": "x"}}))
    assert credit_regimes.earlier_cells("one", [])[1] == [{"envs": "x"}]
    with pytest.raises(SystemExit, match=r"--into: cannot read the cells of .*missing\.json"):
        credit_regimes.earlier_cells("missing", [])
