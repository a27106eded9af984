"""Method names: ``method=NAME`` expands to its settings in place among the overrides."""

from __future__ import annotations

import pytest

from agentcredit.config import ConfigError, load_config


def _error(*overrides: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(None, list(overrides))
    return str(info.value)


def test_an_unknown_method_lists_every_method_name_once():
    message = _error("method=vikt")
    assert message.startswith("method = 'vikt' is not a method name; did you mean 'vict'?")
    known = message.split("(known: ")[1].rstrip(")").split(", ")
    assert len(known) == len(set(known)) and {"adrs", "rlsd", "vict", "skill_grpo*"} <= set(known)


def test_a_method_name_expands_in_place_among_the_overrides():
    star = load_config(None, ["method=skill_grpo*"])
    assert (star.credit.estimator, star.rollout.skills, star.eval.skills) == ("grpo", True, True)
    assert load_config(None, ["run.updates=7", "method=skill_prompt"]).run.updates == 0
    assert load_config(None, ["method=skill_prompt", "run.updates=7"]).run.updates == 7
    sdar = load_config(None, ["rollout.skills=true", "method=sdar"])  # the method resets skills
    assert (sdar.optim.aux_loss, sdar.rollout.skills, sdar.uses_teacher) == ("sdar", False, True)
    adrs = load_config(None, ["method=adrs", "credit.options.backbone=gigpo",
                              "credit.options.gate=off"])
    assert adrs.credit.options["gate"] == "off"  # not YAML's False
    assert adrs.credit.options["backbone"]["name"] == "gigpo"
    assert not load_config(None, ["method=gigpo"]).uses_skills
