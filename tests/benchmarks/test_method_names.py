"""The benchmarks' ``NAME[/BACKBONE[/GATE]]`` method names (``bench_common.method_overrides``)
accept the VICT paper's baselines and its compatibility rows (issue 18)."""

from __future__ import annotations

import pytest

from agentcredit.config import estimator_config, load_config
from bench_common import method_overrides


@pytest.mark.parametrize("method, estimator, backbone", [
    ("salt", "salt", None),
    ("salt/rloo", "salt", "rloo"),
    ("hcapo", "hcapo", None),
    ("proxmo", "proxmo", None),
    ("dapo", "grpo", None),
    ("vict/salt", "vict", "salt"),
    ("vict/hcapo", "vict", "hcapo"),
    ("vict/gigpo", "vict", "gigpo"),
])
def test_the_new_method_names_resolve_to_their_estimators(method, estimator, backbone):
    config = load_config(None, method_overrides(method))
    assert config.credit.estimator == estimator
    if backbone is not None:
        assert config.credit.options["backbone"]["name"] == backbone


def test_dapo_brings_its_sampling_and_hcapo_its_hindsight_pass():
    assert load_config(None, method_overrides("dapo")).rollout.dynamic_sampling_rounds == 3
    assert "hindsight" in load_config(None, method_overrides("vict/hcapo")).inputs


def test_a_reading_suffix_sets_the_paper_literal_median_and_an_unknown_one_stops():
    config = load_config(None, method_overrides("vict+median/gigpo"))
    assert config.credit.options["centre"] == "median"
    assert config.credit.options["backbone"]["name"] == "gigpo"
    default = load_config(None, method_overrides("vict/grpo"))
    assert estimator_config(default.credit).centre == "mean"
    with pytest.raises(SystemExit, match=r"\+mode"):
        method_overrides("vict+mode/grpo")
