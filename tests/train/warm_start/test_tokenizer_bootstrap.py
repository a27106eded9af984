"""The locally trained tokenizer: chat template and exact round-trips of environment text."""

from __future__ import annotations

import pytest

from agentcredit.train.warm_start.tokenizer_bootstrap import train_bpe_tokenizer

ROUND_TRIP_TEXTS = [
    (
        "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, "
        "a countertop 2.\nYour task is to: heat some egg and put it in countertop."
    ),
    "go to countertop 1",
    "take egg 1 from countertop 2",
]


@pytest.fixture(scope="module")
def tokenizer(alfworld_corpus):
    return train_bpe_tokenizer(alfworld_corpus)


def test_special_tokens_follow_qwen_chatml(tokenizer):
    assert tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.bos_token is None
    im_start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert tokenizer.encode("<|im_start|>user\nhi<|im_end|>")[0] == im_start
    assert tokenizer.encode("<|im_end|>") == [tokenizer.eos_token_id]


def test_chat_template_renders_system_user_assistant_and_generation_prompt(tokenizer):
    messages = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "go to countertop 1"},
        {"role": "assistant", "content": "take egg 1 from countertop 2"},
    ]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False)
    assert rendered == (
        "<|im_start|>system\nYou are an agent.<|im_end|>\n"
        "<|im_start|>user\ngo to countertop 1<|im_end|>\n"
        "<|im_start|>assistant\ntake egg 1 from countertop 2<|im_end|>\n"
    )
    prompt = tokenizer.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_end|>\n<|im_start|>assistant\n")
    ids = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
    assert tokenizer.decode(ids) == rendered


@pytest.mark.parametrize("text", ROUND_TRIP_TEXTS)
def test_alfworld_text_round_trips_exactly(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_unseen_text_round_trips_without_unknown_tokens(tokenizer):
    text = "Think: the Mug 3 is in drawer 12 ; then go to  shelf 7\n\n<answer>ok</answer>"
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_actions_seen_in_the_corpus_encode_one_token_per_word(tokenizer):
    assert len(tokenizer.encode("go to countertop 1")) == 4
    assert len(tokenizer.encode("take egg 1 from countertop 2")) == 6


def test_training_is_deterministic(alfworld_corpus, tokenizer):
    again = train_bpe_tokenizer(iter(alfworld_corpus))
    assert again.get_vocab() == tokenizer.get_vocab()
