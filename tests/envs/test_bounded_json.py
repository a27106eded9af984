"""Bounded JSON: ordinary JSON parses as ``json`` does; depth, long numbers, NaN and bad bytes
are refused with one ``JsonRefused``, never ``RecursionError`` or Python's int-limit error."""

import json

import pytest

from agentcredit.envs.bounded_json import MAX_DEPTH, JsonRefused, loads, nesting_depth


def test_ordinary_json_parses_as_the_standard_parser_does():
    text = '{"a": [1, -2.5e3, "x]", {"b": null}], "c": true, "d": 12345678901234567890}'
    assert loads(text) == json.loads(text)
    assert loads(text.encode()) == json.loads(text)


def test_depth_counts_arrays_and_objects_and_allows_exactly_the_limit():
    assert nesting_depth(1) == 0
    assert nesting_depth({"a": [[], {"b": [1]}]}) == 4
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(JsonRefused, match=f"{MAX_DEPTH + 1} deep"):
        loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


@pytest.mark.parametrize("text, reason", [
    ("[" * 100_000 + "]" * 100_000, "too deep"),
    ('{"a": ' * 3_000 + "1" + "}" * 3_000, "too deep"),
    ("9" * 5_000, "a number of 5000 characters"),
    ("[0." + "1" * 200 + "]", "a number of 202 characters"),
    ("[NaN]", "NaN"), ("-Infinity", "-Infinity"),
    ('{"a": }', "is not valid JSON: Expecting value"),
    (b'"\xff"', "is not UTF-8"),
])
def test_hostile_text_is_refused_in_one_line(text, reason):
    with pytest.raises(JsonRefused, match=reason) as refused:
        loads(text)
    assert "\n" not in str(refused.value)
