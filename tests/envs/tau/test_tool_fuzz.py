"""tau's tools called directly with hostile arguments, 10,000 calls per domain: no exception
escapes ``call_tool``, every answer is text UTF-8 can encode, and the database can always be
fingerprinted (the reward hashes it as UTF-8).

Half the calls are a golden action of a task with one argument replaced by a hostile value,
so the write tools' deep paths run; the rest call a random tool with arguments drawn from the
database's own strings and hostile values. The database is fresh every 50 calls, and the
shared initial records must equal ``db.json`` at the end.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from agentcredit.envs.tau.database import Database, canonical_json
from agentcredit.envs.tau.domains import load_domain
from agentcredit.envs.tau.reward import golden_actions
from agentcredit.envs.tau.toolkit import (
    BAD_ARGUMENTS,
    TOOLKITS,
    call_tool,
    make_toolkit,
    unencodable_argument,
)

CALLS = 10_000
SURROGATES = ("\ud800", "a\udfffb", "\udcff" * 3)


def _strings_of(db: dict[str, Any], per_table: int = 60) -> list[str]:
    """Short strings found in the first records of each table (ids, statuses, cabins)."""
    found, stack = set(), []
    for table in db.values():
        for key in list(table)[:per_table]:
            found.add(key)
            stack.append(table[key])
    while stack:
        value = stack.pop()
        if isinstance(value, str) and len(value) < 40:
            found.add(value)
        elif isinstance(value, dict):
            stack += list(value.values())
        elif isinstance(value, list):
            stack += value
    return sorted(found)


def _hostile(rng: random.Random, strings: list[str], depth: int = 0) -> Any:
    kind = rng.randrange(12)
    if kind == 0:
        return rng.choice(SURROGATES)
    if kind == 1:
        return rng.choice(strings) + rng.choice(SURROGATES)
    if kind == 2:
        return rng.choice([0, -1, 1, 10 ** 40, -(10 ** 40), 2 ** 63])
    if kind == 3:
        return rng.choice([0.0, -0.5, 1e308, -1e308, 1e-320])
    if kind == 4:
        return rng.choice([True, False, None])
    if kind == 5:
        return rng.choice(["", " ", "\x00", "x" * 10_000, "\u202e", "🙂"])
    if kind in (6, 7) and depth < 3:
        return [_hostile(rng, strings, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 8 and depth < 3:
        return {rng.choice([*strings[:20], "\udcff"]): _hostile(rng, strings, depth + 1)
                for _ in range(rng.randrange(3))}
    if kind == 9:
        return [rng.choice(strings)] * rng.randrange(1, 4)  # duplicates of a real id
    return rng.choice(strings)


def _call(rng: random.Random, domain: str, goldens: list[dict], strings: list[str]
          ) -> tuple[str, dict[str, Any]]:
    if goldens and rng.random() < 0.5:
        action = rng.choice(goldens)
        arguments = copy.deepcopy(dict(action["arguments"]))
        if arguments:
            arguments[rng.choice(sorted(arguments))] = _hostile(rng, strings)
        if rng.random() < 0.1:
            arguments["unexpected"] = _hostile(rng, strings)
        return action["name"], arguments
    name = rng.choice(TOOLKITS[domain].TOOLS)
    import inspect

    params = [p for p in inspect.signature(getattr(TOOLKITS[domain], name)).parameters
              if p != "self"]
    return name, {p: _hostile(rng, strings) for p in params if rng.random() < 0.9}


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_ten_thousand_hostile_tool_calls_raise_nothing_and_keep_the_database_hashable(domain):
    data = load_domain(domain)
    initial = canonical_json(data.db)
    goldens = [a for task in data.tasks.values() for a in golden_actions(task)]
    strings = _strings_of(data.db)
    rng = random.Random(0)
    kinds: dict[str, int] = {}
    for index in range(CALLS):
        if index % 50 == 0:
            db = Database(data.db)
            toolkit = make_toolkit(domain, db)
        name, arguments = _call(rng, domain, goldens, strings)
        outcome = call_tool(toolkit, name, arguments)  # an exception fails the test here
        kinds[outcome.kind] = kinds.get(outcome.kind, 0) + 1
        outcome.content.encode("utf-8")
        db.fingerprint()
    assert canonical_json(data.db) == initial  # no call changed the shared records
    assert set(kinds) >= {"ok", "tool_error", BAD_ARGUMENTS}, kinds  # every path was reached


def test_a_lone_surrogate_in_an_argument_is_an_error_the_agent_sees_and_changes_nothing():
    data = load_domain("retail")
    user_id = next(iter(data.db["users"]))
    db = Database(data.db)
    outcome = call_tool(make_toolkit("retail", db), "modify_user_address",
                        {"user_id": user_id, "address1": "1 Main St\ud800", "address2": "",
                         "city": "Austin", "state": "TX", "country": "USA", "zip": "78701"})
    assert outcome.error and outcome.kind == BAD_ARGUMENTS
    assert "argument 'address1' holds text that is not valid Unicode" in outcome.content
    assert db.changes() == {}
    assert json.loads(json.dumps(db.fingerprint()))  # hashable as UTF-8


@pytest.mark.parametrize(("arguments", "where"), [
    ({"a": "ok", "b": ["x", {"c": "\udc80"}]}, "'b'[1]['c']"),
    ({"a": {"\ud800": 1}}, "'a'"),
    ({"\udfff": "fine"}, "'\\udfff'"),
    ({"a": "ok", "b": [1, 2.5, None, {"c": "d"}]}, ""),
])
def test_the_unencodable_place_is_named(arguments, where):
    assert unencodable_argument(arguments) == where
