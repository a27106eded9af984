"""``agentcredit report``'s page, read as HTML: one offline file with curves, tables and the
viewer's data; seeds averaged as documented; runs in progress and damaged files reported,
not fatal; every text from a run escaped."""

from __future__ import annotations

import gzip
import html.parser
import json
import re
from pathlib import Path

import pytest
import yaml

from agentcredit.report.page import ReportError, write_report
from agentcredit.report.run_files import find_runs
from agentcredit.report.tables import credit_check_table, success_tables, vict_audit_table

from .conftest import HOSTILE_NAME, IMG, SCRIPT


class PageParts(html.parser.HTMLParser):
    """The text of every element with an id, the JSON blocks, and every tag seen."""

    def __init__(self, page: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: dict[str, str] = {}
        self._open: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if "id" in attrs:
            self._open.append(attrs["id"])
            self.text.setdefault(attrs["id"], "")

    def handle_endtag(self, tag):
        if tag in ("table", "script", "section", "div", "ul") and self._open:
            self._open.pop()

    def handle_data(self, data):
        for element in self._open:
            self.text[element] += data

    def json(self, element_id: str):
        return json.loads(self.text[element_id])


def report(paths, tmp_path: Path, **options) -> tuple[PageParts, object, str]:
    tmp_path.mkdir(exist_ok=True)  # the page goes into a folder that exists
    result = write_report(paths, tmp_path / "report.html", **options)
    page = result.path.read_bytes().decode("utf-8")  # strict: the file is valid UTF-8
    return PageParts(page), result, page


def test_the_page_is_one_offline_file_with_curves_tables_and_the_viewer(report_runs, tmp_path):
    parts, result, page = report([report_runs], tmp_path)
    assert (result.runs, result.methods, result.problems) == (2, 2, [])
    # offline: no tag loads anything; Plotly and the page's script are inline
    assert not [t for t, a in parts.tags if a.get("src") or (t == "link" and a.get("href"))]
    assert "Plotly.newPlot" in page and len(page) > 3_000_000
    figures = {f["figure"]["layout"]["title"]["text"]: f["figure"]
               for f in parts.json("report-figures")}
    for title in ("Validation success", "Policy entropy (mean over response tokens)",
                  "KL to the reference policy (k3)", "Invalid-action rate (training rollouts)",
                  "VICT proof coverage", "ADRS teacher signal: mean ℓ^T − ℓ^b per token"):
        assert title in figures, title
    success = figures["Validation success"]["data"]
    assert {t["name"] for t in success} == {"vict", "adrs"}
    assert [t.get("fill") for t in success].count("toself") == 2  # one band per method
    vict_only = figures["VICT proof coverage"]["data"]
    assert {t["name"] for t in vict_only} == {"vict"}
    for table in ("runs", "success-final", "success-valid_seen", "auc-valid_seen",
                  "success-valid_unseen", "vict-audit", "ledger", "credit-check", "timing"):
        assert f"table-{table}" in parts.text, table
    assert "vict_seed0" in parts.text["table-runs"] and "finished" in parts.text["table-runs"]
    viewer = parts.json("report-viewer")
    assert {r["name"]: [u["update"] for u in r["updates"]] for r in viewer["runs"]} == {
        "vict_seed0": [2, 3], "adrs_seed0": [1, 2]}


def _eval_run(root: Path, name: str, seed: int, points: dict[int, float]) -> None:
    run = root / name
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"run": {"updates": max(points),
                                                             "seed": seed}}))
    lines = [{"kind": "eval", "update": u, "eval/success": s, "eval/valid/success": s,
              "eval/valid/success/pick": s / 2} for u, s in points.items()]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


def test_final_success_and_auc_are_the_mean_and_sd_over_a_methods_seeds(tmp_path):
    _eval_run(tmp_path, "a_seed0", 0, {0: 0.0, 2: 0.5})   # AUC 25 %
    _eval_run(tmp_path, "a_seed1", 1, {0: 0.5, 2: 1.0})   # AUC 75 %
    _eval_run(tmp_path, "b_seed0", 0, {0: 0.2, 4: 0.2})
    runs, _ = find_runs([tmp_path])
    overall, by_type, auc = success_tables(runs)
    assert overall.header == ["method", "seeds", "all", "valid"]
    a = overall.rows[0]
    assert a[:2] == ["a", 2]
    assert (a[2].mean, a[2].sd, a[2].n) == pytest.approx((0.75, 0.5 ** 0.5 / 2, 2))
    assert by_type.header == ["method", "all", "pick"]
    assert by_type.rows[0][2].mean == pytest.approx(0.375)
    assert auc.rows[0][1].mean == pytest.approx(50.0)
    assert auc.rows[1][1].mean == pytest.approx(20.0) and auc.rows[1][1].n == 1


def _checked_run(root: Path, name: str, seed: int, checks: dict[int, dict[str, float]]) -> None:
    run = root / name
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"run": {"updates": 4, "seed": seed}}))
    lines = [{"kind": "update", "update": u, "rollout/success": 0.5,
              **{f"credit_check/solver/{k}": v for k, v in checks.get(u, {}).items()}}
             for u in range(1, 5)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


def test_the_credit_check_table_has_a_row_per_method_and_checked_update(tmp_path):
    _checked_run(tmp_path, "a_seed0", 0, {2: {"pooled": 0.2, "within": 0.0, "sign": 0.5,
                                              "pooled_random": 0.1},
                                          4: {"pooled": 0.5, "within": 0.1}})
    _checked_run(tmp_path, "a_seed1", 1, {2: {"pooled": 0.4, "within": 0.2, "sign": 0.7,
                                              "pooled_random": -0.1}})
    _checked_run(tmp_path, "b_seed0", 0, {})
    runs, _ = find_runs([tmp_path])
    table = credit_check_table(runs)
    assert table.header[:4] == ["method", "update", "seeds", "pooled ρ"]
    assert [row[:3] for row in table.rows] == [["a", 2, 2], ["a", 4, 1]]  # b was not checked
    pooled, signal, within, sign, balanced, chance, cost = table.rows[0][3:]
    assert (pooled.mean, pooled.sd) == pytest.approx((0.3, 0.02 ** 0.5))
    assert (within.mean, sign.mean, chance.mean) == pytest.approx((0.1, 0.6, 0.0))
    assert signal is None and balanced is None and cost is None  # not logged
    parts, _, _ = report([tmp_path], tmp_path / "out")
    assert "table-credit-check" in parts.text and "credit-check-hint" not in parts.text
    figures = {f["figure"]["layout"]["title"]["text"] for f in parts.json("report-figures")}
    assert "Credit check: pooled Spearman ρ of credit and solver truth" in figures


def test_a_report_without_a_credit_check_says_how_to_log_one(tmp_path):
    _checked_run(tmp_path, "b_seed0", 0, {})
    parts, _, _ = report([tmp_path], tmp_path / "out")
    assert "table-credit-check" not in parts.text
    assert "run.credit_check_every=K" in parts.text["credit-check-hint"]


def test_a_run_in_progress_is_reported_as_far_as_it_has_got(runs_copy, tmp_path):
    metrics = runs_copy / "vict_seed0" / "metrics.jsonl"
    lines = metrics.read_bytes().split(b"\n")
    first_update = next(i for i, line in enumerate(lines) if b'"kind": "update"' in line)
    metrics.write_bytes(b"\n".join(lines[:first_update + 1]) + b'\n{"kind": "upd')  # torn
    parts, result, _ = report([runs_copy], tmp_path)
    assert result.problems == []  # a torn last line is a run still writing, not damage
    assert "in progress (1 of 3 updates)" in parts.text["table-runs"]


def test_missing_and_damaged_files_are_named_on_the_page_and_the_rest_renders(runs_copy,
                                                                             tmp_path):
    (runs_copy / "adrs_seed0" / "config.yaml").unlink()
    metrics = runs_copy / "vict_seed0" / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.write_text("".join(lines[:2]) + "{not json\n" + "".join(lines[2:]))
    newest = runs_copy / "vict_seed0" / "rollouts" / "update_00003.json.gz"
    newest.write_bytes(gzip.compress(b'{"format": 1, "rollouts": [')[:20])
    parts, result, _ = report([runs_copy, tmp_path / "nowhere"], tmp_path)
    problems = parts.text["problems"]
    for named in ("nowhere does not exist", "adrs_seed0: config.yaml is missing",
                  "vict_seed0: metrics.jsonl: line 3 skipped (not a JSON record)",
                  "update_00003.json.gz is damaged"):
        assert named in problems, named
    assert len(result.problems) == 4
    figures = {f["figure"]["layout"]["title"]["text"]: f["figure"]
               for f in parts.json("report-figures")}
    assert {t["name"] for t in figures["Validation success"]["data"]} == {"vict", "adrs"}
    viewer = {r["name"]: [u["update"] for u in r["updates"]]
              for r in parts.json("report-viewer")["runs"]}
    assert viewer == {"vict_seed0": [2], "adrs_seed0": [1, 2]}


def test_no_run_under_the_paths_is_an_error_naming_each_path(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match=r"empty holds no run directory.*nowhere does not "
                                          "exist") as refused:
        write_report([tmp_path / "empty", tmp_path / "nowhere"], tmp_path / "r.html")
    assert str(refused.value).count("(") == 1  # what a run directory holds, said once


def test_counts_on_the_page_are_singular_for_one(report_runs, tmp_path):
    *_, page = report([report_runs / "vict_seed0"], tmp_path)
    assert "1 run of 1 method from" in page and 'title="1 seed"' in page
    assert "1 seeds" not in page and "1 runs" not in page


def test_the_viewer_budget_keeps_the_newest_update_and_says_what_it_left_out(report_runs,
                                                                              tmp_path):
    parts, result, _ = report([report_runs], tmp_path, viewer_mb=0.005)
    runs = parts.json("report-viewer")["runs"]
    assert [[u["update"] for u in r["updates"]] for r in runs] == [[2], [3]]  # adrs, vict
    assert "raise --viewer-mb to include more" in parts.text["viewer-section"]
    assert result.size_bytes < 7_000_000


def test_html_and_undecodable_bytes_from_a_run_reach_the_page_only_as_text(hostile_run,
                                                                          tmp_path):
    parts, result, page = report([hostile_run], tmp_path)
    assert SCRIPT not in page and IMG not in page and "<img" not in page
    assert [t for t, _ in parts.tags].count("script") == 4  # plotly, 2 JSON blocks, the page's
    assert HOSTILE_NAME in parts.text["table-runs"]  # shown, as text
    hostile = next(r for r in parts.json("report-viewer")["runs"] if r["name"] == HOSTILE_NAME)
    steps = hostile["updates"][-1]["groups"][0]["rollouts"][0]["steps"]
    assert (steps[0]["observation"], steps[0]["response"]) == (SCRIPT, IMG)
    assert steps[1]["observation"] == "before \ufffd after"
    assert steps[1]["response"] == "raw \ufffd\ufffd bytes"
    names = {t["name"] for f in parts.json("report-figures") for t in f["figure"]["data"]}
    assert '"&gt;&lt;img src=x onerror=alert(1)&gt;' in names  # Plotly reads some tags
    assert any("bytes that are not UTF-8 on line" in p for p in result.problems)
    assert re.search(r"line \d+ \(shown as \ufffd\)", parts.text["problems"])


def test_the_vict_audit_shows_whole_group_ties_apart_and_the_corrected_share(tmp_path):
    run = tmp_path / "vict_seed0"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"run": {"updates": 2, "seed": 0}}))
    lines = [{"kind": "update", "update": u, "credit/vict/atoms_per_task": 6.0,
              "credit/vict/abstain/tie_pct": tie, "credit/vict/abstain_tie_group_pct": group,
              "credit/vict/corrected_share": share, "credit/vict/nonzero_steps_per_rollout": 2.0}
             for u, tie, group, share in ((1, 50.0, 40.0, 0.1), (2, 30.0, 10.0, 0.3))]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    runs, _ = find_runs([tmp_path])
    table = vict_audit_table(runs)
    (row,) = table.rows
    cell = dict(zip(table.header, row, strict=True))
    assert cell["tie %"].mean == pytest.approx(40.0)  # the mean over the run's two updates
    assert cell["whole group tied %"].mean == pytest.approx(25.0)
    assert cell["corrected share"].mean == pytest.approx(0.2)
    assert cell["actions / rollout"].mean == pytest.approx(2.0)


def test_the_vict_audit_shows_abstention_per_fact_with_its_top_reason_and_the_core_split(
        tmp_path):
    run = tmp_path / "vict_seed0"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"run": {"updates": 2, "seed": 0}}))
    # no_edge 10 then 2 (mean 6), terminal_only 4 then 6 (mean 5): no_edge leads on the mean
    # although terminal_only leads the last update
    lines = [{"kind": "update", "update": u, "credit/vict/atoms_per_task": 6.0,
              "credit/vict/abstain_fact_pct": fact, "credit/vict/abstain_fact/no_edge_pct": edge,
              "credit/vict/abstain_fact/terminal_only_pct": terminal,
              "credit/vict/abstain_fact/tie_pct": 0.0,
              "credit/vict/nonzero_steps_per_triggered": 4.0,
              "credit/vict/core_picked_mean": picked, "credit/vict/core_closure_mean": 1.0}
             for u, fact, edge, terminal, picked in ((1, 14.0, 10.0, 4.0, 2.0),
                                                     (2, 8.0, 2.0, 6.0, 3.0))]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    runs, _ = find_runs([tmp_path])
    table = vict_audit_table(runs)
    (row,) = table.rows
    cell = dict(zip(table.header, row, strict=True))
    assert cell["fact abstain %"].mean == pytest.approx(11.0)
    assert cell["top fact reason"] == "no_edge"
    assert cell["actions / triggered"].mean == pytest.approx(4.0)
    assert cell["core picked"].mean == pytest.approx(2.5)
    assert cell["core closure"].mean == pytest.approx(1.0)
