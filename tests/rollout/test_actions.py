"""Action parsing (docs/backbones.md §2): what counts as an action, and what is unparsable."""

import pytest

from agentcredit.rollout.actions import format_action, parse_action


def test_bare_format_takes_the_stripped_response_as_the_action():
    assert parse_action("  go to desk 1 \n", "bare") == "go to desk 1"


@pytest.mark.parametrize("response", ["", "   ", "go to desk 1\ntake pen 1"])
def test_bare_format_rejects_empty_or_multi_line_responses(response):
    assert parse_action(response, "bare") is None


def test_tagged_format_reads_the_action_after_an_optional_think_block():
    assert parse_action("<action>open drawer 1</action>", "tagged") == "open drawer 1"
    response = "<think>the pen is probably\nin the drawer</think>\n<action> open drawer 1 </action>"
    assert parse_action(response, "tagged") == "open drawer 1"


@pytest.mark.parametrize("response", [
    "open drawer 1",                                   # no tags
    "<action></action>",                               # empty action
    "<think>hmm</think>",                              # thought but no action
    "sure! <action>open drawer 1</action>",            # text outside the allowed preamble
    "<action>open drawer 1",                           # unclosed tag
])
def test_tagged_format_marks_malformed_responses_unparsable(response):
    assert parse_action(response, "tagged") is None


def test_raw_format_passes_the_whole_stripped_response_line_breaks_included():
    response = "  <think>Velmor is a city.\nI should search.</think>\n<search> Velmor </search>\n"
    assert parse_action(response, "raw") == (
        "<think>Velmor is a city.\nI should search.</think>\n<search> Velmor </search>")


@pytest.mark.parametrize("response", ["", " \n\t "])
def test_raw_format_marks_an_empty_response_unparsable(response):
    assert parse_action(response, "raw") is None


@pytest.mark.parametrize("fmt", ["bare", "tagged", "raw"])
def test_format_action_round_trips_through_parse_action(fmt):
    action = "take pen 1 from desk 2"
    assert parse_action(format_action(action, fmt), fmt) == action


def test_an_unknown_format_is_an_error():
    with pytest.raises(ValueError, match="bare"):
        parse_action("x", "json")
