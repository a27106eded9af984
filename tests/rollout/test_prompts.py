"""Prompts: built with the chat template, holding the task, the history window, the observation
and the admissible actions; the ``compact`` history style (one line per past step)."""

import pytest

from agentcredit.rollout.prompts import PromptConfig, build_messages, build_prompt_ids, recent

HISTORY = [(f"observation {i}", f"action {i}") for i in range(5)]


def _prompt(tokenizer, config, history=HISTORY):
    ids = build_prompt_ids(tokenizer, "take the apple", history, "You are in room 2.",
                           ("go left", "take apple"), config)
    return tokenizer.decode(ids)


def test_prompt_holds_task_recent_history_observation_and_actions(fake_tokenizer):
    text = _prompt(fake_tokenizer, PromptConfig(history_window=2))
    assert "Your task is to: take the apple" in text
    assert "Current observation: You are in room 2." in text
    assert "Admissible actions:\ngo left\ntake apple" in text
    # only the last two (observation, action) pairs
    assert "observation 3" in text and "action 4" in text
    assert "observation 2" not in text and "action 2" not in text


def test_prompt_is_a_chat_ending_with_the_generation_prompt(fake_tokenizer):
    text = _prompt(fake_tokenizer, PromptConfig())
    assert text.startswith("<|im_start|>system\n")
    assert text.endswith("<|im_start|>assistant\n")
    assert "Reply with exactly one admissible action" in text


def test_tagged_format_asks_for_action_tags(fake_tokenizer):
    assert "<action>" in _prompt(fake_tokenizer, PromptConfig(action_format="tagged"))


def test_a_zero_window_shows_no_history(fake_tokenizer):
    text = _prompt(fake_tokenizer, PromptConfig(history_window=0))
    assert "Recent steps" not in text and "observation 4" not in text
    assert recent(HISTORY, 0) == [] and recent(HISTORY, 9) == HISTORY


def test_history_is_dropped_oldest_first_to_fit_the_token_limit(fake_tokenizer):
    full = build_prompt_ids(fake_tokenizer, "take the apple", HISTORY, "You are in room 2.",
                            ("go left",), PromptConfig(history_window=5))
    limit = len(full) - 1
    text = fake_tokenizer.decode(build_prompt_ids(
        fake_tokenizer, "take the apple", HISTORY, "You are in room 2.", ("go left",),
        PromptConfig(history_window=5, max_prompt_tokens=limit)))
    assert "observation 0" not in text and "observation 4" in text


def test_the_default_pairs_layout_shows_each_observation_before_its_action():
    (_, user) = build_messages("take the apple", HISTORY[-2:], "You are in room 2.",
                               ("go left",), PromptConfig())
    assert user["content"] == (
        "Your task is to: take the apple\n"
        "Recent steps:\n"
        "Observation: observation 3\nAction: action 3\n"
        "Observation: observation 4\nAction: action 4\n"
        "Current observation: You are in room 2.\n"
        "Admissible actions:\ngo left")


EPISODE = [("-= Welcome =-\n\nYou are in the middle of a room. You see a cabinet 1.",
            "go to cabinet 1"),
           ("The cabinet 1 is closed.", "open cabinet 1")]
OPENED = "You open the cabinet 1. The cabinet 1 is open. In it, you see a egg 2."
COMPACT = PromptConfig(history_window=30, history_style="compact")


def test_compact_history_shows_each_action_with_the_observation_that_followed_it(
        fake_tokenizer):
    messages = build_messages("put a hot egg in the sinkbasin.", EPISODE, OPENED,
                              ("take egg 2 from cabinet 1", "close cabinet 1"), COMPACT)
    # the room description (before the first shown action) and the current observation
    # (after the last one) appear once each: not in the history lines
    # and the task comes last, next to the answer
    assert messages[1]["content"] == (
        "Your past actions and what followed:\n"
        "> go to cabinet 1 | The cabinet 1 is closed.\n"
        "> open cabinet 1\n"
        f"Current observation: {OPENED}\n"
        "Admissible actions:\n"
        "take egg 2 from cabinet 1\nclose cabinet 1\n"
        "Your task is to: put a hot egg in the sinkbasin.")
    ids = build_prompt_ids(fake_tokenizer, "put a hot egg in the sinkbasin.", EPISODE, OPENED,
                           ("take egg 2 from cabinet 1", "close cabinet 1"), COMPACT)
    assert ids == fake_tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                     tokenize=True, return_dict=False)


def test_compact_history_keeps_one_line_per_step_for_multi_line_observations():
    history = [("start", "look"), ("line one\n\nline two", "wait")]
    (_, user) = build_messages("x", history, "now", (), COMPACT)
    assert "> look | line one line two\n> wait\nCurrent observation: now" in user["content"]


def test_compact_history_without_past_steps_has_no_header():
    (_, user) = build_messages("x", [], "now", (), COMPACT)
    assert user["content"] == "Current observation: now\nAdmissible actions:\nYour task is to: x"


def test_compact_window_counts_actions_shown():
    (_, user) = build_messages("take the apple", HISTORY, "You are in room 2.", (),
                               PromptConfig(history_window=2, history_style="compact"))
    assert "> action 3 | observation 4\n> action 4\nCurrent" in user["content"]
    assert "action 2" not in user["content"] and "observation 3" not in user["content"]


def test_compact_lines_are_dropped_oldest_first_to_fit_the_token_limit(fake_tokenizer):
    def prompt(limit):
        return build_prompt_ids(fake_tokenizer, "take the apple", HISTORY, "You are in room 2.",
                                ("go left",), PromptConfig(history_window=30,
                                                           history_style="compact",
                                                           max_prompt_tokens=limit))
    full = prompt(10**6)
    text = fake_tokenizer.decode(prompt(len(full) - 1))
    assert "> action 0 |" not in text and "> action 1 | observation 2" in text
    assert "> action 4\nCurrent observation: You are in room 2." in text
    # nothing fits: every history line goes, the observation and the actions stay
    text = fake_tokenizer.decode(prompt(16))
    assert "past actions" not in text and "Current observation: You are in room 2." in text


def test_an_unknown_history_style_is_refused_with_the_allowed_ones():
    with pytest.raises(ValueError, match="history_style = 'full'.*pairs, compact"):
        PromptConfig(history_style="full")


def test_compact_marks_the_admissible_actions_the_history_already_holds():
    history = [("room", "go to cabinet 1"), ("The cabinet 1 is closed.", "go to drawer 2")]
    actions = ("go to cabinet 1", "go to drawer 1", "go to drawer 2", "look")
    (_, user) = build_messages("x", history, "now", actions, COMPACT)
    assert user["content"].endswith(
        "Admissible actions:\ngo to cabinet 1 (done before)\ngo to drawer 1\n"
        "go to drawer 2 (done before)\nlook\nYour task is to: x")
    (_, pairs) = build_messages("x", history, "now", actions, PromptConfig(history_window=2))
    assert "(done before)" not in pairs["content"]
