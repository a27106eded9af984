"""YAML from a hostile file: aliases counted each time they are used, nesting bounded
(config/bounded_yaml.py)."""

from __future__ import annotations

import pytest

from agentcredit.config.bounded_yaml import MAX_DEPTH, bounded_plain, loads


def test_bounded_plain_copies_a_plain_value_and_counts_every_value():
    value = {"a": [1, {"b": "x"}], "c": None}
    assert bounded_plain(value, 6) == value
    with pytest.raises(ValueError, match="more than 5 values"):
        bounded_plain(value, 5)


def test_an_alias_is_counted_each_time_it_is_used():
    # 8 values as written (the mapping, a's list and its 2 numbers, b's list, 3 aliases),
    # 14 once each alias is its list of 2 again: 1 + 3 + 1 + 3 * 3
    text = "a: &x [1, 2]\nb: [*x, *x, *x]\n"
    assert bounded_plain(loads(text), 14) == {"a": [1, 2], "b": [[1, 2]] * 3}
    with pytest.raises(ValueError, match="more than 13 values"):
        bounded_plain(loads(text), 13)


def test_a_value_nested_deeper_than_the_bound_is_refused():
    assert loads("[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH) is not None  # 1 at depth MAX_DEPTH
    with pytest.raises(ValueError, match=f"nests deeper than {MAX_DEPTH}"):
        loads("[" * (MAX_DEPTH + 1) + "1" + "]" * (MAX_DEPTH + 1))
