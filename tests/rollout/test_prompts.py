"""Prompts: built with the chat template, holding the task, the history window, the observation
and the admissible actions."""

from agentcredit.rollout.prompts import PromptConfig, build_prompt_ids, recent

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
