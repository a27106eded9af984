"""The report in a real browser: headless Chromium opens the page of real tiny runs (one of
them hostile, ``conftest.hostile_run``) and checks that the curves, the tables and the
viewer render, that opening a step shows its credit, that no injected script runs and
nothing is fetched, and saves a screenshot under ``$TMPDIR`` that is not blank."""

from __future__ import annotations

import base64
import json
import tempfile
from pathlib import Path

import pytest

from agentcredit.report.page import write_report

from .chromium import Page, find_chromium
from .conftest import HOSTILE_NAME, IMG, SCRIPT

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install -y "
                             "chromium; .ci/run installs it)")
READY = "document.body.dataset.ready === '1'"


#: a function that opens every step of the viewer's group in turn; what each detail shows
OPEN_EVERY_STEP = """(() => {
    const found = [];
    for (const step of document.querySelectorAll('#viewer-rollouts .step')) {
        step.click();
        const detail = document.getElementById('viewer-detail');
        const values = detail.querySelector('table');
        found.push({
            headings: [...detail.querySelectorAll('h3')].map((h) => h.textContent),
            notes: [...detail.querySelectorAll('p.muted')].map((p) => p.textContent),
            defined: [...detail.querySelectorAll('.legend dt')].map((d) => d.textContent),
            names: [...values.querySelectorAll('tr')].slice(1).map(
                (r) => [r.cells[0].textContent, r.title]),
            overflow: [...detail.querySelectorAll(':scope > .table-wrap')].map(
                (w) => w.scrollWidth - w.clientWidth),
            saw: step.querySelector('.obs').textContent.startsWith('saw: ')});
    }
    return found;
})"""


def _ledgers(group: dict) -> list[bool]:
    """Whether each step of ``group`` (rollouts in order) holds ledger rows."""
    return [bool(step["ledger"]) for rollout in group["rollouts"] for step in rollout["steps"]]


def _witness(step: dict) -> bool:
    """Whether an opened VICT step shows the witness table; the page says why when it does not."""
    shown = "Witness: the ledger rows of this step" in step["headings"]
    assert shown != ("No ledger row: this step's correction is 0." in step["notes"]), step
    return shown


def _open_step(page: Page, run_name: str, step: int) -> dict:
    """Pick ``run_name`` in the viewer, open ``step`` of the first rollout of the first group;
    what the detail panel shows."""
    page.evaluate(f"""(() => {{
        const pick = document.getElementById('viewer-run');
        pick.value = String([...pick.options].findIndex(
            (o) => o.text.startsWith({json.dumps(run_name)} + ' (')));
        pick.dispatchEvent(new Event('change'));
        document.querySelectorAll('#viewer-rollouts .rollout')[0]
            .querySelectorAll('.step')[{step}].click();
    }})()""")
    return page.evaluate("""(() => {
        const detail = document.getElementById('viewer-detail');
        const text = (selector) => detail.querySelector(selector)?.textContent ?? null;
        return {heading: text('h3'), observation: text('pre.observation'),
                response: text('pre.response'),
                headings: [...detail.querySelectorAll('h3')].map((h) => h.textContent),
                tables: [...detail.querySelectorAll('table')].map(
                    (t) => t.querySelectorAll('tr').length - 1),
                tokens: [...detail.querySelectorAll('.token')].map(
                    (s) => [s.textContent, s.style.backgroundColor]),
                open: document.querySelectorAll('#viewer-rollouts .step.open').length};
    })()""")


def _distinct_colours(page: Page, png: bytes) -> int:
    """How many distinct colours a sample of the PNG's pixels has (decoded by the browser)."""
    return page.evaluate(f"""new Promise((resolve) => {{
        const image = new Image();
        image.onload = () => {{
            const canvas = document.createElement('canvas');
            canvas.width = image.width;
            canvas.height = image.height;
            const context = canvas.getContext('2d');
            context.drawImage(image, 0, 0);
            const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
            const seen = new Set();
            for (let i = 0; i < pixels.length; i += 4 * 37) {{
                seen.add((pixels[i] << 16) | (pixels[i + 1] << 8) | pixels[i + 2]);
            }}
            resolve(seen.size);
        }};
        image.src = 'data:image/png;base64,{base64.b64encode(png).decode()}';
    }})""", awaited=True)


def test_the_report_renders_in_chromium_opens_a_step_and_runs_no_injected_script(hostile_run,
                                                                                tmp_path):
    result = write_report([hostile_run], tmp_path / "report.html")
    figures = json.loads(result.path.read_text().split(
        '<script type="application/json" id="report-figures">')[1].split("</script>")[0])
    with Page(CHROMIUM) as page:
        page.open(result.path.as_uri(), READY)

        # CURVES: every figure drawn by Plotly, a line and a band per method
        drawn = page.evaluate("""({
            plots: document.querySelectorAll('.figure .main-svg').length > 0
                ? document.querySelectorAll('.figure.js-plotly-plot').length : 0,
            traces: [...document.querySelectorAll('.figure.js-plotly-plot')].map(
                (f) => f.querySelectorAll('.scatterlayer .trace').length),
            markers: document.querySelectorAll('.scatterlayer .trace .points path').length,
            bands: [...document.querySelectorAll('.figure.js-plotly-plot')].map(
                (f) => f.querySelectorAll('.scatterlayer path.js-fill').length),
            legend: [...document.querySelectorAll('.legendtext')].map((t) => t.textContent),
        })""")
        assert drawn["plots"] == len(figures) >= 10
        assert drawn["traces"] == [len(f["figure"]["data"]) for f in figures]
        methods = [len(f["figure"]["data"]) // 2 for f in figures]  # a band + a line each
        assert drawn["bands"] == methods and drawn["markers"] > 0
        assert IMG in drawn["legend"]  # the hostile method's name, shown as text

        # TABLES
        rows = page.evaluate("""Object.fromEntries([...document.querySelectorAll('table[id]')]
            .map((t) => [t.id, t.querySelectorAll('tbody tr').length]))""")
        assert rows["table-runs"] == 3 and rows["table-success-final"] == 3
        assert rows["table-vict-audit"] == 2 and rows["table-ledger"] > 0
        assert rows["table-timing"] == 3

        # VIEWER: a VICT step opened shows its values, atoms and proof edges, as text
        detail = _open_step(page, HOSTILE_NAME, 0)
        assert detail["open"] == 1 and detail["heading"] == "Rollout 0, step 0"
        assert (detail["observation"], detail["response"]) == (SCRIPT, IMG)
        assert "Atoms (status before → after this step)" in detail["headings"]
        assert "Proof edges of this step" in detail["headings"]
        assert detail["tables"][1] == 3  # the fake verifier's three atoms
        assert _open_step(page, HOSTILE_NAME, 1)["observation"] == "before \ufffd after"
        adrs = _open_step(page, "adrs_seed0", 0)
        assert "Token heat-map" in adrs["headings"] and adrs["tokens"]
        assert all(colour.startswith("rgba(") for _, colour in adrs["tokens"])

        # nothing injected ran, nothing was fetched, nothing failed
        assert page.evaluate("document.querySelectorAll('img, #viewer script').length") == 0
        assert page.dialogs == [] and page.exceptions == []
        assert {url.split(":", 1)[0] for url in page.requests} == {"file"}

        # SCREENSHOT, under $TMPDIR, not blank
        page.evaluate("document.getElementById('viewer-section').scrollIntoView()")
        shot = Path(tempfile.gettempdir()) / "agentcredit-report-viewer.png"
        png = page.screenshot(shot)
        assert shot.is_file() and png[:8] == b"\x89PNG\r\n\x1a\n"
        assert _distinct_colours(page, png) > 20


def test_the_viewer_opens_on_the_first_group_with_signal_and_defines_every_value(report_runs,
                                                                                tmp_path):
    result = write_report([report_runs], tmp_path / "report.html")
    viewer = json.loads(result.path.read_text().split(
        '<script type="application/json" id="report-viewer">')[1].split("</script>")[0])
    with Page(CHROMIUM) as page:
        page.open(result.path.as_uri(), READY)
        for index, run in enumerate(viewer["runs"]):
            shown = page.evaluate(f"""(() => {{
                const pick = document.getElementById('viewer-run');
                pick.value = '{index}';
                pick.dispatchEvent(new Event('change'));
                const group = document.getElementById('viewer-group');
                return {{update: +document.getElementById('viewer-update').value,
                         group: +group.value, label: group.selectedOptions[0].text}};
            }})()""")
            u, g = shown["update"], shown["group"]
            groups = run["updates"][u]["groups"]
            # the newest update with signal, its first group with signal
            newest = max(i for i, update in enumerate(run["updates"])
                         if any(x["signal"] for x in update["groups"]))
            assert u == newest and g == [x["signal"] for x in groups].index(True)
            assert shown["label"].endswith(f"{groups[g]['won']}/{len(groups[g]['rollouts'])} won")

            # every step of the group opened: values defined, observation named, tables fit
            opened = page.evaluate(OPEN_EVERY_STEP + "()")
            assert opened and all(o["saw"] for o in opened)
            for step in opened:
                assert "Observation before this action" in step["headings"]
                assert all(title for name, title in step["names"] if name != "reward")
                assert step["defined"] == [name for name, _ in step["names"]]
                assert max(step["overflow"]) <= 0, step["headings"]  # the values, atoms, ledger
            names = {name for step in opened for name, _ in step["names"]}
            if run["method"] == "vict":
                assert {"advantage", "base_advantage", "correction", "vict_advantage"} <= names
                assert [_witness(step) for step in opened] == _ledgers(groups[g])
            else:  # ADRS trains on per-token values: the step view shows them
                assert {"step_advantage", "token_advantage"} <= names
                assert "advantage" not in names

        # a VICT group whose winners hold ledger rows: their steps show them as the witness
        (index, run), = [(i, r) for i, r in enumerate(viewer["runs"]) if r["method"] == "vict"]
        u, g = next((u, g) for u, update in enumerate(run["updates"])
                    for g, group in enumerate(update["groups"]) if any(_ledgers(group)))
        opened = page.evaluate(f"""(() => {{
            const pick = (id, value) => {{
                const select = document.getElementById(id);
                select.value = String(value);
                select.dispatchEvent(new Event('change'));
            }};
            pick('viewer-run', {index});
            pick('viewer-update', {u});
            pick('viewer-group', {g});
            return {OPEN_EVERY_STEP}();
        }})()""")
        assert [_witness(step) for step in opened] == _ledgers(run["updates"][u]["groups"][g])
        assert page.exceptions == []


def test_the_viewer_plots_a_checked_groups_credit_against_its_truth_and_hints_otherwise(
        report_runs, tmp_path):
    result = write_report([report_runs], tmp_path / "report.html")
    viewer = json.loads(result.path.read_text().split(
        '<script type="application/json" id="report-viewer">')[1].split("</script>")[0])
    (run,) = [r for r in viewer["runs"] if r["name"] == "vict_seed0"]
    assert [(u["update"], u["truth"]) for u in run["updates"]] == [(2, "solver"), (3, None)]
    with Page(CHROMIUM) as page:
        page.open(result.path.as_uri(), READY)
        shown = []
        for update in range(2):
            shown.append(page.evaluate(f"""(() => {{
                const pick = document.getElementById('viewer-run');
                pick.value = String([...pick.options].findIndex(
                    (o) => o.text.startsWith('vict_seed0 (')));
                pick.dispatchEvent(new Event('change'));
                const update = document.getElementById('viewer-update');
                update.value = '{update}';
                update.dispatchEvent(new Event('change'));
                const plot = document.getElementById('viewer-truth-plot');
                return {{group: +document.getElementById('viewer-group').value,
                         traces: plot ? plot.querySelectorAll('.scatterlayer .trace').length
                                      : null,
                         points: plot ? plot.querySelectorAll('.scatterlayer .point').length
                                      : null,
                         hint: document.getElementById('viewer-no-truth')?.textContent ?? null,
                         }};
            }})()"""))
        checked, plain = shown
        group = run["updates"][0]["groups"][checked["group"]]
        # one trace per rollout of the group, one point per step with a truth and a credit
        assert checked["traces"] == len(group["rollouts"]) and checked["hint"] is None
        assert checked["points"] == sum(
            s["truth"] is not None and s["advantage"] is not None
            for r in group["rollouts"] for s in r["steps"]) > 0
        assert plain["traces"] is None and "run.credit_check_every=K" in plain["hint"]
        # a checked step's values name its truth, defined like every other value
        names = page.evaluate("""(() => {
            const pick = document.getElementById('viewer-update');
            pick.value = '0';
            pick.dispatchEvent(new Event('change'));
            document.querySelector('#viewer-rollouts .step').click();
            return [...document.querySelectorAll('#viewer-detail table')[0].querySelectorAll(
                'tr')].slice(1).map((r) => [r.cells[0].textContent, r.title]);
        })()""")
        assert any(name == "truth" and title.startswith("the solver regret")
                   for name, title in names)
        assert page.exceptions == []
