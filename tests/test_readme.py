"""The README as a manual: every command it shows runs here, or resolves to the config it would
train with; ``agentcredit --help`` shows the README's commands; the files it links exist; no
part of it is a dated log.

Commands that would train or evaluate for minutes are checked without doing so: a ``train``
command resolves through ``agentcredit config --show`` with the same ``--config``, ``--model``
and settings, ``--resume`` through the resume check against a saved quick-start config, and
``eval``, ``audit`` and ``report`` parse and load their config. The quick start itself runs, at
tiny settings, in ``tests/config/presets/test_quick.py``.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from agentcredit.cli import MAIN_EXAMPLES, _parser, _resume_config, main
from agentcredit.config import load_config, save_config

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()


def _command_lines(text: str) -> list[str]:
    """Each command of ``text``'s lines: a ``\\``-continued line joined to the next, a trailing
    ``# comment`` cut."""
    joined = re.sub(r"\\\n\s*", "", text)
    commands = (re.split(r"\s#\s", line, maxsplit=1)[0].strip() for line in joined.splitlines())
    return [command for command in commands if command]


def readme_commands() -> list[str]:
    """Every command in the README's ``bash`` blocks."""
    return [line for block in re.findall(r"```bash\n(.*?)```", README, re.DOTALL)
            for line in _command_lines(block)]


def help_examples() -> list[str]:
    """The commands under ``examples:`` in ``agentcredit --help``."""
    return _command_lines(MAIN_EXAMPLES.split("examples:\n", 1)[1])


COMMANDS = readme_commands()
AGENTCREDIT = [shlex.split(c)[1:] for c in COMMANDS if c.startswith("agentcredit ")]


def test_the_help_examples_are_the_readmes_quick_start_and_usage_commands():
    examples = help_examples()
    assert examples[:2] == ["agentcredit train --config quick",
                            "agentcredit report runs/quick -o report.html"]
    assert [e for e in examples if e not in COMMANDS] == []


def test_the_quick_start_comes_first_in_the_readmes_usage():
    sections = re.findall(r"^## (.+)$", README, re.MULTILINE)
    assert sections.index("Quick start") == sections.index("The two commands") + 1
    assert sections.index("Quick start") < sections.index("Using it")


def test_no_part_of_the_readme_is_a_dated_log():
    assert re.findall(r"\b20\d\d-\d\d-\d\d\b", README) == []
    assert "docs/research_log.md" in README and (ROOT / "docs" / "research_log.md").is_file()


def test_every_file_the_readme_names_exists():
    named = set(re.findall(r"(?:benchmarks/results|docs|examples/verl|src/agentcredit)/"
                           r"[\w./-]+\.(?:json|md|png|sh|py|yaml)", README))
    named = {path for path in named if "NAME" not in path}  # `benchmarks/results/NAME.json`
    assert len(named) > 20
    assert sorted(path for path in named if not (ROOT / path).is_file()) == []


def test_make_pip_and_script_commands_name_what_exists():
    targets = set(re.findall(r"^(\w+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"])
    others = [c for c in COMMANDS if not c.startswith("agentcredit ")]
    assert others, "the README shows make, pip and script commands"
    for command in others:
        words = shlex.split(command)
        if words[0] == "make":
            assert words[1] in targets, command
        elif words[:2] == ["pip", "install"]:
            for package in words[2:]:
                name, _, wanted = package.partition("[")
                if name == "agentcredit":
                    assert set(wanted.rstrip("]").split(",")) <= extras, command
        elif words[0] == "bash":
            assert (ROOT / words[1]).is_file(), command
        else:
            pytest.fail(f"a README command this test does not know how to check: {command}")


@pytest.fixture
def in_a_fresh_folder(tmp_path, monkeypatch):
    """A working folder holding what the README's commands refer to: ``my_run.yaml`` (the
    embedded default with a name) and the quick start's ``runs/quick/config.yaml``."""
    monkeypatch.chdir(tmp_path)
    save_config(load_config(None, ["run.name=my_run"]), tmp_path / "my_run.yaml")
    (tmp_path / "runs" / "quick").mkdir(parents=True)
    save_config(load_config("quick"), tmp_path / "runs" / "quick" / "config.yaml")
    return tmp_path


@pytest.mark.parametrize("argv", AGENTCREDIT, ids=" ".join)
def test_every_agentcredit_command_in_the_readme_runs_or_resolves(argv, in_a_fresh_folder,
                                                                  capsys):
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    overrides = [*getattr(args, "overrides", []), *extra]
    assert all("=" in o and not o.startswith("-") for o in overrides), argv
    if args.command == "config":  # cheap: run it for real
        assert main(argv) == 0
        assert capsys.readouterr().out
    elif args.command == "train" and args.resume:
        config = _resume_config(args, overrides)
        assert config.run.name == Path(args.resume).name
    elif args.command == "train":
        show = ["config", "--show", *(["--config", args.config] if args.config else []),
                *(["--model", args.model] if args.model else []), *overrides]
        assert main(show) == 0, capsys.readouterr().err
    elif args.command in ("eval", "audit"):
        env = [f"env={args.env}"] if getattr(args, "env", None) else []
        load_config(args.config, [*env, *overrides])
    else:
        assert args.command == "report" and args.run_dirs
