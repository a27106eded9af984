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


# THE TABLES: each lists exactly what the code defines


def table(anchor: str, header: str) -> list[list[str]]:
    """The body rows, as cells, of the first table after the text ``anchor`` (a heading)
    whose header row starts ``| header |``."""
    lines = DOC.read_text(encoding="utf-8").split(anchor, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def names(anchor: str, header: str) -> list[str]:
    """The first column's names (``tasks(split)`` → ``tasks``) of a table, in order."""
    return [re.findall(r"`([\w.]+)", row[0])[0] for row in table(anchor, header)]


def members(protocol: type) -> set[str]:
    """The attributes and methods a ``typing.Protocol`` declares."""
    own = {name for name in vars(protocol) if not name.startswith("_")}
    return own | set(getattr(protocol, "__annotations__", {}))


def test_the_suite_table_lists_exactly_the_suite_protocol():
    from agentcredit.envs.suites import EnvSuite

    listed = names("### The suite contract", "member")
    assert listed == ["splits", "validation_splits", "tasks", "make_env"]
    assert set(listed) == members(EnvSuite)


def test_the_protocol_table_lists_exactly_the_environment_protocol():
    from agentcredit.envs.base import Environment

    assert set(names("### The environment protocol", "member")) == members(Environment)


def test_the_records_table_lists_every_field_of_task_observation_and_stepinfo():
    import dataclasses

    from agentcredit.envs.base import Observation, StepInfo, Task

    expected = [f"{cls.__name__}.{f.name}" for cls in (Task, Observation, StepInfo)
                for f in dataclasses.fields(cls)]
    assert names("### The environment protocol", "field") == expected


def test_the_hooks_table_lists_every_field_of_the_environment_spec():
    import dataclasses

    from agentcredit.envs.suites import EnvironmentSpec

    listed = [name for row in table("### The hooks", "hook")
              for name in re.findall(r"`(\w+)`", row[0])]
    assert listed == [f.name for f in dataclasses.fields(EnvironmentSpec)][2:]  # not name, suite


def test_the_goal_tables_list_the_goal_fields_and_every_goal_verifier_argument():
    import dataclasses
    import inspect

    from agentcredit.verifier.goal import Goal, goal_verifier

    assert names("### A Level-0 verifier", "`Goal` field") == \
        [f.name for f in dataclasses.fields(Goal)]
    assert names("### A Level-0 verifier", "`goal_verifier` argument") == \
        list(inspect.signature(goal_verifier).parameters)


def test_the_credit_batch_tables_list_its_fields_its_views_and_the_result_fields():
    import dataclasses

    from agentcredit.credit import CreditBatch, CreditResult

    anchor = "### What an estimator reads"
    assert names(anchor, "field") == [f.name for f in dataclasses.fields(CreditBatch)]
    views = [name for name, value in vars(CreditBatch).items() if isinstance(value, property)]
    assert names(anchor, "property") == views
    assert names("It returns a `CreditResult` (`credit/result.py`)", "field") == \
        [f.name for f in dataclasses.fields(CreditResult)]


def test_the_checks_tables_list_exactly_the_checks_and_what_they_play():
    from agentcredit.credit.registry import CLAIMS
    from agentcredit.testing.env_conformance import CHECKS, RANDOM_STEPS, TASKS

    assert tuple(names("## Check an environment", "check")) == CHECKS
    assert tuple(names("## Check an estimator", "claim")) == CLAIMS
    text = " ".join(DOC.read_text(encoding="utf-8").split("## Check an environment\n", 1)[1]
                    .split())
    words = {2: "two", 8: "eight"}
    assert f"the environment's first {words[TASKS]} train tasks" in text
    assert f"{words[RANDOM_STEPS]} random admissible actions" in text


def test_the_reward_scale_quotes_the_trainers_defaults():
    from agentcredit.config import RolloutConfig

    text = DOC.read_text(encoding="utf-8").split("### The reward scale", 1)[1].split("###")[0]
    defaults = RolloutConfig()
    assert f"`rollout.invalid_penalty` ({defaults.invalid_penalty:g})".replace("-", "−") in text
    assert f"`rollout.outcome_reward` ({defaults.outcome_reward:g})" in text
    assert defaults.outcome_signal == "won" and "`rollout.outcome_signal=won` (the default)" in text


def test_the_first_run_describes_the_quick_preset():
    from agentcredit.config import load_config

    text = " ".join(DOC.read_text(encoding="utf-8").split("## A first run\n", 1)[1]
                    .split("\n## ", 1)[0].split())
    quick = load_config("quick", [])
    assert (quick.env.train_games_per_type, quick.env.valid_games_per_type) == (4, 1)
    assert "`games` of 4 train and 1 valid per split" in text
    assert (quick.sft.demonstrations_per_task, quick.sft.demonstration_noise) == (2, 0.2)
    assert "two demonstrations per task with a random command at 20% of the steps" in text
    assert (quick.run.updates, quick.rollout.tasks_per_update, quick.rollout.group_size) == \
        (3, 4, 4)
    assert "3 GRPO updates of 4 tasks × 4 rollouts" in text and quick.credit.estimator == "grpo"
    assert f"`rollout.max_steps={quick.rollout.max_steps}`" in text


# THE LAMP PANEL IN THIS PROCESS: its option error, and what a broken copy prints


@pytest.fixture
def lamps(monkeypatch):
    """The example plug-in ``lamps`` registered in a registry of its own; its engine module."""
    import importlib

    from agentcredit.envs import suites

    monkeypatch.setattr(suites, "_SPECS", dict(suites._SPECS))
    monkeypatch.setattr(suites, "_PROVIDERS", dict(suites._PROVIDERS))
    monkeypatch.syspath_prepend(str(DOC.parents[1] / "examples" / "plugin_env"))
    for name in [m for m in sys.modules if m == "lamps" or m.startswith("lamps.")]:
        monkeypatch.delitem(sys.modules, name)
    importlib.import_module("lamps.plugin")
    engine = importlib.import_module("lamps.engine")
    yield engine
    for name in [m for m in sys.modules if m == "lamps" or m.startswith("lamps.")]:
        del sys.modules[name]


def blocks(section: str, language: str = "") -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", body, re.DOTALL)


def test_an_option_out_of_its_range_is_the_line_the_doc_shows(lamps):
    from lamps.plugin import LampsConfig

    from agentcredit.config.schema import ConfigError, build

    with pytest.raises(ConfigError) as refused:
        build(LampsConfig, {"lamps": 60}, "env.lamps.")
    line = next(b for b in blocks("Write an environment") if b.startswith("error:"))
    assert line.strip() == f"error: {refused.value}"


def test_the_environment_check_recipe_passes_the_lamp_panel(lamps, monkeypatch, capsys):
    (check,) = snippets("Check an environment")
    load_module("check_lamps", check, monkeypatch)
    assert capsys.readouterr().out.splitlines() == [
        "ok   suite", "ok   environment", "ok   observation", "ok   reward", "ok   bad_action",
        "ok   expert", "ok   verifier"]


def test_a_panel_paying_ten_prints_the_docs_report_and_train_refuses_it(
        lamps, monkeypatch, tmp_path, capsys):
    from agentcredit.cli import main

    step = lamps.LampsEnv.step

    def tenfold(self, action_text):
        obs, _, done, info = step(self, action_text)
        return obs, 10 * float(self.won), done, info

    monkeypatch.setattr(lamps.LampsEnv, "step", tenfold)
    report, refusal = blocks("Check an environment")[:2]
    assert main(["conformance", "--env", "lamps"]) == 1
    assert capsys.readouterr().out == report
    assert main(["train", "env=lamps", f"run.output_dir={tmp_path}"]) == 2
    assert capsys.readouterr().err == refusal
