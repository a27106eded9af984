"""``agentcredit report`` on the command line: writes the page, says what it wrote, fails in
one line when there is nothing to report or Plotly is missing, and never loads torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

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
    output = tmp_path / "out" / "page.html"
    assert main(["report", str(report_runs / "vict_seed0"), str(report_runs / "adrs_seed0"),
                 "-o", str(output)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {output} (2 runs of 2 methods, ") and output.is_file()


def test_nothing_to_report_is_one_error_line_with_status_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nowhere"), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no run directory to report:") and err.count("\n") == 1
    assert not (tmp_path / "r.html").exists()


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
