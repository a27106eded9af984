"""The credit-regimes benchmark's command line (groups and K per environment) and its picture."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from credit_regimes import FIGURE_METHODS, GROUPS, figure_svg, per_env


def test_groups_take_one_number_for_all_or_a_number_per_environment():
    assert per_env("8", GROUPS, "--groups") == dict.fromkeys(GROUPS, 8)
    chosen = per_env("alfworld=4,searchqa=512", GROUPS, "--groups")
    assert (chosen["alfworld"], chosen["searchqa"], chosen["webshop"]) == (
        4, 512, GROUPS["webshop"])
    with pytest.raises(SystemExit, match="'mars=3' is not env=N"):
        per_env("mars=3", GROUPS, "--groups")


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
