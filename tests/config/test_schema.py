"""The rules every config key obeys at load (config/schema.py): a numeric key has a finite
range unless its class's ``_unbounded`` says why not, text holds no control character, a URL
parses, and a section takes keys, not a value."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing
from typing import ClassVar, Literal

import pytest

from agentcredit.cli import main
from agentcredit.config import TrainConfig, leaf_keys, load_config, selectable
from agentcredit.config.load import NAME_SHORTHANDS
from agentcredit.config.schema import ConfigError, allowed_range, build, url_problem, validate
from agentcredit.credit import estimator_names, get_estimator

from .test_load import _error  # the one-line ConfigError message of load_config(None, overrides)

NUMBERS = (int, float, int | None, float | None)
HUGE = {int: "1000000000000", float: "1e12"}
"""A billion where a handful was meant, and then some: 10^12 exceeds every range."""


def _owned_keys(cls: type, prefix: str, setup: tuple[str, ...]) -> list[tuple]:
    """``(setup, key, hint, owner, field)`` of every key ``leaf_keys`` gives for ``cls``, a
    selectable field's members' keys included, each reached with the overrides ``setup``."""
    rows = []
    for key, hint, _ in leaf_keys(cls, prefix):
        name = key[len(prefix):]
        if "." in name:
            continue  # a nested section's keys: from its own class, below
        rows.append((setup, key, hint, cls, name))
        if dataclasses.is_dataclass(hint):
            rows += _owned_keys(hint, key + ".", setup)
        for choice, member in (selectable(hint) or {}).items():
            rows += _owned_keys(member, key + ".", (*setup, f"{key}.name={choice}"))
    return rows


def _every_key() -> list[tuple]:
    """The run config's keys (every environment's options among them) and each built-in
    estimator's options, each options class walked once."""
    rows = _owned_keys(TrainConfig, "", ())
    walked = set()
    for name in estimator_names():
        options = get_estimator(name).config_cls
        if options.__module__.startswith("agentcredit.") and options not in walked:
            walked.add(options)
            rows += _owned_keys(options, "credit.options.", (f"credit.estimator={name}",))
    return rows


# `model=5` and `env=5` are short for `model.name=5` and `env.name=5` (load.NAME_SHORTHANDS)
KEYS = [row for row in _every_key() if row[1] not in NAME_SHORTHANDS]


def _absurd(hint, owner: type, name: str) -> list[str]:
    """Override values no key of type ``hint`` may take (YAML: ``"a\\0b"`` holds a NUL)."""
    if hint in NUMBERS:
        number = HUGE[int if int in typing.get_args(hint) or hint is int else float]
        return [number, f"-{number}"]
    if hint is str:
        url = ["http://127.0.0.1:0/v1/"] if "url" in name else []
        return ['"a\\0b"', *url]
    if typing.get_origin(hint) is list:
        return ['["a\\0b"]']
    if typing.get_origin(hint) is Literal or hint is bool:
        return ["absurd"]
    if dataclasses.is_dataclass(hint) or selectable(hint) or typing.get_origin(hint) is dict:
        return ["5"]
    raise AssertionError(f"{owner.__name__}.{name}: a type the walk has no absurd value for "
                         f"({hint}); add one")


def _open_side(owner: type, name: str, value: str) -> bool:
    """Whether the number ``value`` lies on a side of the range ``_unbounded`` leaves open."""
    if name not in getattr(owner, "_unbounded", {}):
        return False
    low, high = getattr(owner, "_limits", {}).get(name, (None, None))[:2]
    return low is None if value.startswith("-") else high is None


@pytest.mark.parametrize(("setup", "key", "hint", "owner", "name"), KEYS,
                         ids=[f"{'+'.join(row[0])}:{row[1]}" for row in KEYS])
def test_every_key_refuses_an_absurd_value_in_one_line_naming_the_key(setup, key, hint, owner,
                                                                        name):
    for value in _absurd(hint, owner, name):
        if hint in NUMBERS and _open_side(owner, name, value):
            load_config(None, [*setup, f"{key}={value}"])  # the allow-list is truthful
            continue
        message = _error(*setup, f"{key}={value}")
        assert message.startswith(f"{key} = "), message
        if hint in NUMBERS:
            assert "is out of range; allowed" in message, message


@pytest.mark.parametrize("owner", sorted({row[3] for row in KEYS}, key=lambda c: c.__name__))
def test_every_numeric_field_has_both_bounds_or_a_reason_and_every_url_is_parsed(owner):
    hints = typing.get_type_hints(owner)
    limits = getattr(owner, "_limits", {})
    unbounded = getattr(owner, "_unbounded", {})
    assert set(limits) | set(unbounded) == {name for name, hint in hints.items()
                                            if hint in NUMBERS}
    open_sides = {name for name, limit in limits.items() if None in limit[:2]}
    assert open_sides | (set(unbounded) - set(limits)) == set(unbounded)  # a reason, a gap
    assert all(reason.strip() for reason in unbounded.values())
    urls = set(getattr(owner, "_urls", ()))
    assert urls == {name for name, hint in hints.items() if hint is str and "url" in name}


@dataclasses.dataclass
class Knob:
    """A plug-in's options with a range and no ``__post_init__``."""

    _limits: ClassVar[dict[str, tuple]] = {"turns": (1, 10)}

    turns: int = 1


def test_build_checks_the_ranges_of_options_whose_class_does_not_validate_itself():
    assert Knob(turns=11).turns == 11  # built in Python without validate: unchecked
    with pytest.raises(ConfigError, match=r"^env\.knob\.turns = 11 is out of range; "
                                          r"allowed \[1, 10\]$"):
        build(Knob, {"turns": 11}, "env.knob.")


def test_an_open_lower_bound_is_written_with_a_parenthesis():
    @dataclasses.dataclass
    class Rate:
        _limits: ClassVar[dict[str, tuple]] = {"lr": (0.0, 1.0, "open")}
        lr: float = 0.1

    assert allowed_range(Rate, "lr") == "(0.0, 1.0]"
    with pytest.raises(ConfigError, match=r"Rate\.lr = 0\.0 is out of range; allowed \(0\.0, "):
        validate(Rate(lr=0.0))


@pytest.mark.parametrize(("text", "control"), [
    ("runs\x00x", "\\x00"), ("runs\nx", "\\n"), ("runs\tx", "\\t"), ("runs\x7fx", "\\x7f"),
    ("runs\x85x", "\\x85"),
])
def test_a_string_with_a_control_character_is_refused_naming_the_key(text, control):
    with pytest.raises(ConfigError) as info:
        build(TrainConfig, {"run": {"output_dir": text}})
    assert str(info.value).startswith(f"run.output_dir = {text!r} holds the control character "
                                      f"'{control}'")


def test_ordinary_text_with_spaces_and_accents_is_accepted():
    config = build(TrainConfig, {"run": {"output_dir": "my runs/été 日本"},
                                 "eval": {"splits": ["valid_seen"]}})
    assert config.run.output_dir == "my runs/été 日本"


def test_a_control_character_in_a_list_of_strings_is_refused():
    message = _error('eval.splits=["valid_seen", "a\\0b"]')
    assert message.startswith("eval.splits = ['valid_seen', 'a\\x00b'] holds the control")


@pytest.mark.parametrize(("url", "problem"), [
    ("http://localhost:8000/v1", ""),
    ("https://api.example.com/v1", ""),
    ("http://host:1/v1", ""),
    ("http://host:65535/v1", ""),
    ("http://host:0/v1", "the port is out of range 1-65535"),
    ("http://host:65536/v1", "the port is out of range 1-65535"),
    ("ftp://host/v1", "the scheme is 'ftp', not http or https"),
    ("http:///v1", "no host"),
    ("http://host:port/v1", "Port could not be cast to integer value as 'port'"),
    ("http://ho st/v1", "it holds a space or a control character"),
    ("http://[::1/v1", "Invalid IPv6 URL"),
])
def test_a_url_is_parsed_into_the_reason_it_cannot_be_requested(url, problem):
    assert url_problem(url) == problem


def test_a_url_of_an_environment_not_selected_is_checked_at_load_too():
    message = _error("env=alfworld", "env.searchqa.retriever_url=http://ho st/retrieve")
    assert message.startswith("env.searchqa.retriever_url = 'http://ho st/retrieve' must be an "
                              "http(s) URL")


def test_a_value_given_for_a_whole_section_is_refused_with_the_key_it_meant():
    assert _error("run=5") == ("run = 5 gives a value to a section, which takes keys; set one "
                               "of them (for example run.name=5; config --list shows them all)")
    assert _error("optim=fast").startswith("optim = 'fast' gives a value to a section")


def test_model_and_env_stay_short_for_their_name():
    config = load_config(None, ["env=webshop", "model=embedded"])
    assert (config.env.name, config.model.name) == ("webshop", "embedded")


def test_config_list_shows_each_numeric_keys_range(capsys):
    assert main(["config", "--list"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line}
    assert lines["rollout.group_size"].split()[1:4] == ["int", "[1,", "1024]"]
    assert lines["env.tau.patience"].split()[1:4] == ["int", "[1,", "1000]"]
    assert " float (0.0, 1.0] " in lines["credit.options.eps"]  # ADRS: ε > 0
    assert lines["optim.grad_clip"].split()[1:4] == ["float", "[0.0,", "inf]"]
    assert lines["optim.grad_clip"].endswith(" Unbounded: a clip above the gradient's norm only "
                                             "turns clipping off (1e9 is the usual way to say "
                                             "so), which costs nothing.")


@pytest.mark.parametrize(("override", "names"), [
    ("env.tau.patience=1000000000000", "env.tau.patience = 1000000000000 is out of range"),
    ('sft.cache_dir="starts\\0x"', "sft.cache_dir = 'starts\\x00x' holds the control"),
])
def test_config_show_with_an_absurd_value_prints_one_error_line_and_exits_2(override, names):
    done = subprocess.run([sys.executable, "-m", "agentcredit.cli", "config", "--show", override],
                          capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"error: {names}")
