"""A built-in environment or estimator is named in its own files and in the places
``tests/builtin_places.py`` lists, nowhere else: each built-in appears in each listed place,
and no module of the package compares a value with an environment's name or keys a mapping by
one (the if/elif chains the environment hooks replaced), except the listed data."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agentcredit.credit import estimator_names, get_estimator
from agentcredit.envs.suites import env_suite_names

from .builtin_places import ENVIRONMENT_DATA, ENVIRONMENT_PLACES, ESTIMATOR_PLACES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "agentcredit"
#: the built-ins (this test session may register more: the fake corridor)
BUILT_IN_ENVS = ("alfworld", "webshop", "searchqa", "tau-retail", "tau-airline")


def test_the_built_in_environments_are_registered():
    assert set(BUILT_IN_ENVS) <= set(env_suite_names())


@pytest.mark.parametrize("place", ESTIMATOR_PLACES, ids=lambda p: p.path)
def test_every_built_in_estimator_is_named_in_each_listed_place(place):
    text = (ROOT / place.path).read_text(encoding="utf-8")
    if place.by_module:  # credit/__init__.py imports credit.<module> (``vict`` for 7 of them)
        words = set(text.replace(",", " ").split())
        missing = [name for name in estimator_names() if get_estimator(name).fn.__module__
                   .removeprefix("agentcredit.credit.").split(".")[0] not in words]
    else:
        missing = [name for name in estimator_names()
                   if f'"{name}"' not in text and f"`{name}`" not in text]
    assert missing == [], f"{place.path} ({place.why}) does not name {missing}"


@pytest.mark.parametrize("place", ENVIRONMENT_PLACES, ids=lambda p: p.path)
def test_every_built_in_environment_is_named_in_each_listed_place(place):
    text = (ROOT / place.path).read_text(encoding="utf-8")
    assert [name for name in BUILT_IN_ENVS if f'"{name}"' not in text] == []


def branches_on_names(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """``(line, name)`` of each comparison with, or mapping key of, one of ``names``, outside
    assignments to the data names of ``ENVIRONMENT_DATA``."""
    data = {target for _, target in ENVIRONMENT_DATA}
    skip = {id(node) for stmt in ast.walk(tree) if isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id in data for t in stmt.targets)
            for node in ast.walk(stmt.value)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare):
            values = [sub for part in (node.left, *node.comparators) for sub in ast.walk(part)]
        elif isinstance(node, ast.Dict):
            values = [key for key in node.keys if key is not None]
        else:
            continue
        found += [(node.lineno, v.value) for v in values
                  if isinstance(v, ast.Constant) and v.value in names]
    return sorted(found)


def test_no_module_outside_an_environments_own_files_branches_on_its_name():
    own = [PACKAGE / "envs" / name for name in ("alfworld", "webshop", "searchqa", "tau")]
    listed = {ROOT / p.path for p in ENVIRONMENT_PLACES}
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in listed or any(path.is_relative_to(folder) for folder in own):
            continue
        found = branches_on_names(ast.parse(path.read_text(encoding="utf-8")),
                                  set(BUILT_IN_ENVS))
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}


def test_the_scan_sees_an_if_chain_on_an_environment_name():
    code = ('def planner(env):\n    if env == "webshop":\n        return 1\n'
            'STEPS = {"alfworld": 50}\nPAPER_TABLE12 = {"alfworld": 1}\n')
    assert branches_on_names(ast.parse(code), set(BUILT_IN_ENVS)) == \
        [(2, "webshop"), (4, "alfworld")]
