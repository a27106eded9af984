"""``agentcredit report``: one self-contained HTML page from run directories.

``write_report(paths, output)`` reads the runs (``run_files``), builds the
curves (``curves``), the tables (``tables``) and the viewer's data (``viewer``),
and writes one file that opens offline: the Plotly library, the page's script
and style sheet are inlined, nothing is fetched.

Escaping, the page's one security rule: every text that comes from a run (names,
observations, actions, atom ids, file names) reaches the page either through
``html.escape`` (tables, lists) or inside a JSON block whose ``<``, ``>`` and
``&`` are written as ``\\u003c``-style escapes and which the script reads with
``JSON.parse`` and shows as text nodes; Plotly gets names and titles with
``<``, ``>`` and ``&`` escaped, since it reads a few tags in labels. Text that is not valid
Unicode shows as U+FFFD.

The page is written as a new file renamed over ``output`` (``run/safe_files.write_output``).
Before any run is read, ``output`` is refused (``output_refusal``) when its folder does not
exist (no folder is made for a mistyped path), when it is a link, a special file or a file
with a second hard link, or when it lies inside a given path with a link on the way there;
each refusal is one ``ReportError`` naming the path.
"""

from __future__ import annotations

import html
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from plotly.offline import get_plotlyjs
from plotly.utils import PlotlyJSONEncoder

from agentcredit.disk_full import writing
from agentcredit.report.aggregate import Summary, counted
from agentcredit.report.curves import FAMILIES, curve_figures
from agentcredit.report.run_files import RunData, clean_text, find_runs
from agentcredit.report.tables import (
    Table,
    credit_check_table,
    ledger_table,
    runs_table,
    success_tables,
    timing_table,
    vict_audit_table,
)
from agentcredit.report.viewer import viewer_data
from agentcredit.run.safe_files import output_refusal, write_output


class ReportError(ValueError):
    """Nothing to report: no run directory was found under the given paths."""


@dataclass
class ReportResult:
    """What ``write_report`` wrote.

    Attributes:
        path: the HTML file.
        runs: how many runs it shows.
        methods: how many methods.
        size_bytes: the file's size.
        seconds: wall time to read the runs and write the page.
        problems: every missing or damaged file, as named on the page.
    """

    path: Path
    runs: int
    methods: int
    size_bytes: int
    seconds: float
    problems: list[str] = field(default_factory=list)


def write_report(paths: Sequence[str | Path], output: str | Path, viewer_mb: float = 8.0
                 ) -> ReportResult:
    """Write the report of the runs under ``paths`` to ``output``.

    Args:
        paths: run directories, or folders of run directories (``run_files.find_runs``).
        output: the HTML file to write, in a folder that exists.
        viewer_mb: the budget, in MB, of saved rollouts embedded for the viewer.

    Raises:
        ReportError: no run was found (the message names what each path held), or ``output``
            is refused (see the module docstring).
    """
    began = time.perf_counter()
    output = Path(output)
    _check_output(output, paths)
    runs, problems = find_runs(paths)
    if not runs:
        raise ReportError("no run directory to report: " + "; ".join(problems))
    if not math.isfinite(viewer_mb) or viewer_mb < 0:
        raise ReportError(f"--viewer-mb {viewer_mb}: must be a number, 0 or more (0 leaves the "
                          "viewer out)")
    problems += [f"{run.name}: {p}" for run in runs for p in run.problems]
    viewer, viewer_notes, unreadable = (viewer_data(runs, int(viewer_mb * 1e6)) if viewer_mb
                                        else ({"runs": []}, [], []))
    problems += unreadable
    page = render_page(runs, problems, viewer, viewer_notes, [str(p) for p in paths])
    _check_output(output, paths)  # again: a link planted while the page was built
    with writing(output):
        write_output(output, page.encode("utf-8"))
    return ReportResult(output, len(runs), len({r.method for r in runs}), output.stat().st_size,
                        time.perf_counter() - began, problems)


def _check_output(output: Path, paths: Sequence[str | Path]) -> None:
    why = output_refusal(output, within=paths)
    if why:
        raise ReportError(f"-o {output}: {why}")


def render_page(runs: Sequence[RunData], problems: Sequence[str], viewer: dict[str, Any],
                viewer_notes: Sequence[str], sources: Sequence[str]) -> str:
    """The whole HTML page (see the module docstring)."""
    figures = curve_figures(runs)
    tables = [runs_table(runs), *success_tables(runs)]
    credit_tables = [t for t in (vict_audit_table(runs), ledger_table(runs)) if t is not None]
    check = credit_check_table(runs)
    timing = timing_table(runs)
    methods = list(dict.fromkeys(r.method for r in runs))
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")

    header = (f"<header><h1>agentcredit report</h1><p class=\"muted\">{counted(len(runs), 'run')} "
              f"of {counted(len(methods), 'method')} from {_text(', '.join(sources))} · written "
              f"{stamp}</p>"
              "<nav><a href=\"#curves\">Curves</a><a href=\"#tables\">Tables</a>"
              "<a href=\"#credit\">Credit</a><a href=\"#timing\">Timing</a>"
              "<a href=\"#viewer-section\">Rollout viewer</a></nav></header><main>")
    body = [header]
    if problems:
        body.append("<section id=\"problems\"><h2>Problems</h2><div class=\"problems\"><p>These "
                    "files are missing or damaged; the rest of the page shows what could be "
                    "read.</p><ul>" + "".join(f"<li>{_text(p)}</li>" for p in problems)
                    + "</ul></div></section>")
    body.append("<section id=\"curves\"><h2>Learning curves</h2><p class=\"note\">Mean over "
                "seeds; the band is ± one standard deviation over seeds. Hover for the "
                "number of seeds behind a point.</p>")
    family = None
    specs = []
    for number, (spec, figure) in enumerate(figures):
        if spec.family != family:
            if family is not None:
                body.append("</div>")
            family = spec.family
            body.append(f"<h3>{_text(FAMILIES[family])}</h3><div class=\"figures\">")
        div = f"figure-{number}"
        body.append(f"<div class=\"figure\" id=\"{div}\" data-metric=\"{_text(spec.key)}\"></div>")
        specs.append({"id": div, "figure": figure})
    if family is not None:
        body.append("</div>")
    else:
        body.append("<p class=\"muted\">No run has logged an update or evaluation yet.</p>")
    body.append("</section><section id=\"tables\"><h2>Tables</h2>")
    body += [_table(t) for t in tables]
    body.append("</section><section id=\"credit\"><h2>Credit</h2>")
    body += [_table(t) for t in credit_tables] or [
        "<p class=\"muted\">No run logged VICT diagnostics or ledger rows.</p>"]
    body.append(_table(check) if check else (
        "<p class=\"muted\" id=\"credit-check-hint\">No run logged the credit check: train "
        "with run.credit_check_every=K to score the credit against the solver truth every K "
        "updates (docs/credit_check.md).</p>"))
    body.append("</section><section id=\"timing\"><h2>Timing</h2>")
    body.append(_table(timing) if timing else "<p class=\"muted\">No update timing logged.</p>")
    body.append("</section>")
    body.append(_viewer_section(viewer, viewer_notes))
    body.append("</main>")
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>agentcredit report: {_text(', '.join(methods))}</title>"
            f"<style>{_asset('report.css')}</style>"
            f"<script>{get_plotlyjs()}</script></head><body>"
            + "".join(body)
            + _json_block("report-figures", specs) + _json_block("report-viewer", viewer)
            + f"<script>{_asset('report.js')}</script></body></html>\n")


def _viewer_section(viewer: dict[str, Any], notes: Sequence[str]) -> str:
    parts = ["<section id=\"viewer-section\"><h2>Rollout viewer</h2>"]
    if not viewer["runs"]:
        parts.append("<p class=\"muted\">No saved rollouts: train with run.save_rollouts=K to "
                     "save every K-th update's rollouts for this viewer.</p>")
    else:
        parts.append("<p class=\"note\">Steps are coloured by their final advantage (red "
                     "negative, blue positive, scaled per update). Open a step to see its "
                     "atoms, proof edges, ledger rows and, with teacher scores, its tokens.</p>"
                     "<div class=\"controls\"><label>run<select id=\"viewer-run\"></select>"
                     "</label><label>update<select id=\"viewer-update\"></select></label>"
                     "<label>group<select id=\"viewer-group\"></select></label></div>"
                     "<div id=\"viewer-truth\"></div>"
                     "<div class=\"viewer\" id=\"viewer\"><div id=\"viewer-rollouts\"></div>"
                     "<div class=\"detail\" id=\"viewer-detail\"></div></div>")
    if notes:
        parts.append("<ul class=\"note\">" + "".join(f"<li>{_text(n)}</li>" for n in notes)
                     + "</ul>")
    parts.append("</section>")
    return "".join(parts)


def _table(table: Table) -> str:
    head = "".join(f"<th>{_text(h)}</th>" for h in table.header)
    rows = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in table.rows)
    note = f"<p class=\"note\">{_text(table.note)}</p>" if table.note else ""
    return (f"<h3>{_text(table.title)}</h3><div class=\"table-wrap\"><table id=\"table-"
            f"{_text(table.key)}\"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
            f"</div>{note}")


def _cell(value: Any) -> str:
    if value is None:
        return "<td class=\"num\">—</td>"
    if isinstance(value, Summary):
        shown = _number(value.mean) + (f" ± {_number(value.sd)}" if value.n > 1 else "")
        return f"<td class=\"num\" title=\"{counted(value.n, 'seed')}\">{shown}</td>"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"<td>{_text(str(value))}</td>"
    return f"<td class=\"num\">{_number(value)}</td>"


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.3f}"


def _text(value: str) -> str:
    """Run text as HTML text: escaped, lone surrogates as U+FFFD."""
    return html.escape(clean_text(value), quote=True)


def _json_block(element_id: str, data: Any) -> str:
    """``data`` as a ``<script type="application/json">`` block the page's script parses;
    ``<``, ``>`` and ``&`` are escaped so no text inside can end the block."""
    text = json.dumps(data, cls=PlotlyJSONEncoder, ensure_ascii=True)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"<script type=\"application/json\" id=\"{element_id}\">{text}</script>"


def _asset(name: str) -> str:
    return (resources.files("agentcredit.report") / "assets" / name).read_text(encoding="utf-8")
