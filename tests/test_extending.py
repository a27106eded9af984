"""docs/extending.md's recipes, run as written."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from agentcredit.credit import registry

DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def snippets(section: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", body, re.DOTALL)


@pytest.fixture
def own_registry(monkeypatch):
    monkeypatch.setattr(registry, "_ESTIMATORS", dict(registry._ESTIMATORS))


def load_module(name: str, code: str, monkeypatch) -> types.ModuleType:
    """``code`` imported as module ``name``, as a user's file would be."""
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(code, str(DOC), "exec"), module.__dict__)  # noqa: S102  (the doc's own code)
    return module


def test_the_estimator_recipe_registers_one_that_passes_the_conformance_suite(
        own_registry, monkeypatch, capsys):
    (estimator,) = snippets("Write an estimator (one module)")
    load_module("last_step_bonus", estimator, monkeypatch)
    (check,) = snippets("Check an estimator")
    load_module("check_it", check, monkeypatch)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["ok   finite_and_shaped", "ok   declared_inputs", "ok   deterministic",
                     "ok   sign", "ok   step_credit", "ok   constant_group_zero",
                     "ok   permutation"]


def test_the_recipe_estimator_takes_its_option_from_the_cli(own_registry, monkeypatch, capsys):
    from agentcredit.cli import main

    (estimator,) = snippets("Write an estimator (one module)")
    load_module("last_step_bonus", estimator, monkeypatch)
    assert main(["conformance", "last_step_bonus", "credit.options.bonus=3"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        "last_step_bonus: conforms (7 checks, 0 failures)"


def test_the_environment_recipe_is_the_examples_registration():
    text = DOC.read_text(encoding="utf-8")
    body = text.split("## Write an environment\n", 1)[1].split("\n## ", 1)[0]
    registration = body.split("```python\n", 1)[1].split("```", 1)[0]
    plugin = (DOC.parents[1] / "examples" / "plugin_env" / "lamps" / "plugin.py").read_text()
    lines = [line.strip() for line in registration.splitlines() if line.strip()]
    assert "\n".join(lines) in "\n".join(line.strip() for line in plugin.splitlines())


def test_the_level_0_verifier_recipe_derives_its_atoms_from_the_goal(monkeypatch, capsys):
    *_, goal = snippets("Write an environment")
    load_module("goal_recipe", goal, monkeypatch)
    assert capsys.readouterr().out.strip() == \
        "['equal:lamp:1', 'equal:lamp:3', 'unchanged:lamp:']"
