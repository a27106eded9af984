"""``agentcredit report`` on the command line: writes the page, says what it wrote, fails in
one line when there is nothing to report or Plotly is missing, and never loads torch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentcredit.cli import main


def test_report_help_is_plain_text_with_examples_and_the_extra_to_install(capsys):
    with pytest.raises(SystemExit) as done:
        main(["report", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "examples:\n  agentcredit report " in text and "`" not in text
    assert "pip install 'agentcredit[report]'" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_report_writes_the_page_and_says_what_it_wrote(report_runs, tmp_path, capsys):
    output = tmp_path / "page.html"
    assert main(["report", str(report_runs / "vict_seed0"), str(report_runs / "adrs_seed0"),
                 "-o", str(output)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {output} (2 runs of 2 methods, ") and output.is_file()


def test_nothing_to_report_is_one_error_line_with_status_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nowhere"), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no run directory to report:") and err.count("\n") == 1
    assert not (tmp_path / "r.html").exists()


def _a_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"kind": "eval", "update": 0, "eval/success": 0.5}\n')
    (tmp_path / "precious.txt").write_text("keep me")
    return run


def _plant(tmp_path: Path, run: Path, case: str) -> tuple[Path, str]:
    """``(output, why it is refused)`` with ``case`` planted in or beside the run."""
    precious = tmp_path / "precious.txt"
    if case == "a symlink in the run":
        (run / "report.html").symlink_to(precious)
        return run / "report.html", (f"{run / 'report.html'} is a symlink (to {precious}); an "
                                     "output is never written through a link: remove the "
                                     "link or write elsewhere")
    if case == "a hard link in the run":
        os.link(precious, run / "report.html")
        return run / "report.html", (f"{run / 'report.html'} has 2 hard links (another name "
                                     "shares its bytes); an output is never written through "
                                     "to another name: remove it or write elsewhere")
    if case == "a folder link in the run":
        (run / "pages").symlink_to(tmp_path, target_is_directory=True)
        return run / "pages" / "precious.txt", (
            f"{run / 'pages'} is a symlink (to {tmp_path}) inside the run folder {run}; "
            "nothing is written through a link in a run folder: remove the link or write "
            "elsewhere")
    return Path("/dev/null"), ("/dev/null is a character device, not a regular file; an "
                               "output is written as a file of its own: move it away or write "
                               "elsewhere")


@pytest.mark.parametrize("case", ["a symlink in the run", "a hard link in the run",
                                  "a folder link in the run", "a device"])
def test_an_output_that_would_write_elsewhere_is_one_error_line_before_any_run_is_read(
        tmp_path, monkeypatch, capsys, case):
    run = _a_run(tmp_path)
    output, why = _plant(tmp_path, run, case)
    monkeypatch.setattr("agentcredit.report.page.find_runs",
                        lambda paths: pytest.fail("the runs were read before the check"))
    assert main(["report", str(run), "-o", str(output)]) == 2
    assert capsys.readouterr().err == f"error: -o {output}: {why}\n"
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_an_output_in_a_missing_folder_is_refused_and_no_folder_is_made(tmp_path, monkeypatch,
                                                                        capsys):
    run = _a_run(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(run), "-o", "no/such/dir/r.html"]) == 2
    assert capsys.readouterr().err == (f"error: -o no/such/dir/r.html: the folder "
                                       f"{tmp_path / 'no/such/dir'} does not exist; create it "
                                       "first or write elsewhere\n")
    assert not (tmp_path / "no").exists()


def test_a_report_replaces_an_earlier_one_and_leaves_no_temporary_file(tmp_path, capsys):
    run = _a_run(tmp_path)
    (run / "report.html").write_text("an earlier report")
    assert main(["report", str(run), "-o", str(run / "report.html")]) == 0
    assert (run / "report.html").read_text().startswith("<!doctype html>")
    assert sorted(p.name for p in run.iterdir()) == ["metrics.jsonl", "report.html"]


def _run(script: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_report_command_never_loads_torch(report_runs, tmp_path):
    done = _run(f"""
        import sys
        from agentcredit.cli import main
        code = main(["report", {str(report_runs)!r}, "-o", "r.html"])
        print("torch loaded:", "torch" in sys.modules)
        raise SystemExit(code)
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("torch loaded: False")


def test_without_plotly_the_report_says_which_extra_to_install(report_runs, tmp_path):
    done = _run(f"""
        import importlib.abc, sys

        class NoPlotly(importlib.abc.MetaPathFinder):  # as if the report extra were missing
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "plotly":
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

        sys.meta_path.insert(0, NoPlotly())
        from agentcredit.cli import main
        raise SystemExit(main(["report", {str(report_runs)!r}]))
    """, tmp_path)
    assert done.returncode == 2
    assert "pip install 'agentcredit[report]'" in done.stderr
    assert not (tmp_path / "report.html").exists()
