"""An error's details said in one line (error_text.py)."""

from __future__ import annotations

from agentcredit.error_text import NO_MESSAGE, first_line, short


def test_first_line_keeps_only_the_first_line_of_the_message():
    assert first_line(ValueError("\n  bad value\nsecond line\n")) == "bad value"


def test_an_error_without_a_message_is_named_by_its_type_or_the_callers_words():
    assert first_line(KeyError()) == "KeyError"
    assert first_line(RuntimeError("  \n "), NO_MESSAGE) == "(no message)"


def test_short_cuts_a_long_value_to_40_characters_and_leaves_a_short_one():
    assert short(7) == "7"
    assert short("x" * 100) == "'" + "x" * 36 + "..."
    assert len(short(list(range(1000)))) == 40
