"""The report's learning curves, drawn with Plotly (``plotly.graph_objects``).

One figure per metric, one line per method: the mean over seeds at every
update some seed logged, inside a band of ± one standard deviation over seeds
(``aggregate.seed_curve``); hovering shows the value and how many seeds are
behind it. A figure appears only when some run logged its metric, so a GRPO-only
report has no VICT panel.

The figures are plain Plotly figure dicts; ``page.py`` embeds them with the
Plotly library itself, so the page draws them offline.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
from plotly.colors import convert_colors_to_same_type, qualitative, unlabel_rgb

from agentcredit.report.aggregate import Records, by_method, counted, evals, seed_curve, updates
from agentcredit.report.run_files import RunData, clean_text

#: Plotly's qualitative palettes, enough distinct colours for 34 methods
#: a run this short (in updates) gets one x tick per update
SHORT_RUN = 12
PALETTE = qualitative.Plotly + qualitative.Dark24


#: y ranges of the units that are shares: success is a fraction of games won in every curve
#: and table of the page, so an all-zero curve still reads as "none of 0 to 1"
RATE_RANGES = {"success rate": (0.0, 1.0), "share of steps": (0.0, 1.0), "%": (0.0, 100.0)}
#: the least y span of any other axis, as a share of its largest |value| (at least
#: ``MIN_SPAN_ABS``): noise in the fifth digit is not magnified into a slope
MIN_SPAN_REL = 0.2
MIN_SPAN_ABS = 1e-3


@dataclass(frozen=True)
class Curve:
    """One figure: ``key`` of the ``records`` lines, titled ``title`` with axis ``unit``."""

    key: str
    records: Records
    title: str
    unit: str
    family: str


CURVES = (
    Curve("eval/success", evals, "Validation success", "success rate", "success"),
    Curve("rollout/success", updates, "Training rollout success", "success rate", "training"),
    Curve("ppo/entropy", updates, "Policy entropy (mean over response tokens)", "nats",
          "training"),
    Curve("ppo/kl", updates, "KL to the reference policy (k3)", "KL", "training"),
    Curve("rollout/invalid_rate", updates, "Invalid-action rate (training rollouts)",
          "share of steps", "training"),
    Curve("credit/vict/proof_coverage_pct", updates, "VICT proof coverage", "%", "vict"),
    Curve("credit/vict/abstain_pct", updates, "VICT abstention (rollouts)", "%", "vict"),
    Curve("credit/vict/trigger_pct", updates, "VICT trigger (rollouts with a correction)", "%",
          "vict"),
    Curve("credit/vict/mean_abs_correction", updates, "VICT mean |correction|", "advantage",
          "vict"),
    Curve("credit/vict/lambda", updates, "VICT scale λ", "λ", "vict"),
    Curve("credit_check/solver/pooled", updates,
          "Credit check: pooled Spearman ρ of credit and solver truth", "ρ", "check"),
    Curve("credit_check/solver/within", updates,
          "Credit check: within-rollout Spearman ρ of credit and solver truth", "ρ", "check"),
    Curve("credit/teacher_minus_behaviour_mean", updates,
          "ADRS teacher signal: mean ℓ^T − ℓ^b per token", "nats", "adrs"),
    Curve("credit/gate_token_mean", updates, "ADRS mean token gate m", "gate", "adrs"),
    Curve("credit/teacher_reward_abs_mean", updates, "ADRS mean |r^T| (teacher reward)",
          "reward", "adrs"),
    Curve("credit/token_path_abs_mean", updates, "ADRS mean |η·Z^T| (token path)", "advantage",
          "adrs"),
)
FAMILIES = {"success": "Validation success", "training": "Training",
            "vict": "VICT diagnostics (docs/vict.md §4.9)",
            "check": "Credit check (docs/credit_check.md)",
            "adrs": "ADRS diagnostics (docs/adrs.md §5)"}


def method_colours(methods: Sequence[str]) -> dict[str, str]:
    """One palette colour per method, in order."""
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(methods)}


def curve_figures(runs: Sequence[RunData]) -> list[tuple[Curve, dict[str, Any]]]:
    """``(curve, Plotly figure dict)`` of every curve some run logged."""
    groups = by_method(runs)
    colours = method_colours(list(groups))
    figures = []
    for spec in CURVES:
        figure = go.Figure()
        for method, members in groups.items():
            points = seed_curve(members, spec.records, spec.key)
            if points:
                _add_method(figure, _plotly_text(method), colours[method], points)
        if figure.data:
            last = max(x for trace in figure.data for x in trace.x)
            figure.update_xaxes(dtick=1 if last <= SHORT_RUN else None)  # no update 1.5
            figure.update_yaxes(range=y_range(spec.unit, [y for trace in figure.data
                                                          for y in trace.y]))
            figure.update_layout(
                title={"text": _plotly_text(spec.title), "font": {"size": 15}},
                xaxis_title="update", yaxis_title=_plotly_text(spec.unit), height=340,
                template="plotly_white", hovermode="x unified",
                margin={"l": 60, "r": 20, "t": 50, "b": 45},
                legend={"orientation": "h", "y": -0.22})
            figures.append((spec, figure.to_plotly_json()))
    return figures


def _add_method(figure: go.Figure, name: str, colour: str, points) -> None:
    """The mean line and its ± sd band for one method."""
    x = [u for u, _ in points]
    mean = [s.mean for _, s in points]
    upper = [s.mean + s.sd for _, s in points]
    lower = [s.mean - s.sd for _, s in points]
    rgb = convert_colors_to_same_type([colour], colortype="rgb")[0][0]
    band = "rgba({:.0f}, {:.0f}, {:.0f}, 0.18)".format(*unlabel_rgb(rgb))
    figure.add_trace(go.Scatter(x=x + x[::-1], y=upper + lower[::-1], fill="toself",
                                fillcolor=band, line={"width": 0}, hoverinfo="skip",
                                legendgroup=name, showlegend=False, name=name))
    figure.add_trace(go.Scatter(x=x, y=mean, mode="lines+markers", name=name, legendgroup=name,
                                line={"color": colour, "width": 2}, marker={"size": 5},
                                cliponaxis=False,  # a point at 0 or 1 drawn whole
                                customdata=[[s.sd, counted(s.n, "seed")] for _, s in points],
                                hovertemplate="%{y:.4g} ± %{customdata[0]:.3g} "
                                              "(%{customdata[1]})"))


def y_range(unit: str, values: Sequence[float]) -> list[float]:
    """The y axis of a curve in ``unit`` over ``values`` (its lines and bands): a share's whole
    range (``RATE_RANGES``, a band past it is cut at the axis); any other unit's data range, at
    least ``MIN_SPAN_REL`` of its largest |value| wide (``MIN_SPAN_ABS`` at 0)."""
    if unit in RATE_RANGES:
        return list(RATE_RANGES[unit])
    low, high = min(values), max(values)
    span = max(high - low, MIN_SPAN_REL * max(abs(low), abs(high)), MIN_SPAN_ABS)
    middle = (low + high) / 2
    pad = 0.05 * span  # a point on the edge stays visible
    return [middle - span / 2 - pad, middle + span / 2 + pad]


def _plotly_text(text: str) -> str:
    """``text`` for a Plotly label, which reads a few HTML tags and the entities ``&lt;``,
    ``&gt;``, ``&amp;``: those three characters escaped, so it shows as written."""
    return html.escape(clean_text(text), quote=False)
