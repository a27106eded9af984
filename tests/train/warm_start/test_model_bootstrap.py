"""The embedded tiny Qwen2: saves, loads back through load_policy, generates, is seeded."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from agentcredit.config import TinyModelConfig
from agentcredit.train.model_loading import load_policy
from agentcredit.train.warm_start.model_bootstrap import bootstrap_tiny_model


def test_tiny_model_loads_back_through_load_policy_with_matching_vocab(tiny_model_dir):
    model, tokenizer = load_policy(str(tiny_model_dir))
    assert model.config.model_type == "qwen2"
    assert model.config.tie_word_embeddings
    assert model.config.vocab_size >= len(tokenizer)
    assert model.config.vocab_size % 8 == 0
    assert model.config.vocab_size - len(tokenizer) < 8
    assert model.config.pad_token_id == tokenizer.pad_token_id
    assert model.config.eos_token_id == tokenizer.eos_token_id
    assert model.get_input_embeddings().weight.shape[0] == model.config.vocab_size


def test_tiny_model_generates_tokens_from_a_chat_prompt(tiny_model_dir):
    model, tokenizer = load_policy(str(tiny_model_dir))
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "go to countertop 1"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    out = model.generate(**prompt, max_new_tokens=5, do_sample=False)
    assert out.shape[0] == 1
    assert 0 < out.shape[1] - prompt["input_ids"].shape[1] <= 5
    assert int(out.max()) < model.config.vocab_size


def test_same_seed_gives_identical_weights_and_other_seed_differs(
    tmp_path, alfworld_corpus, tiny_config, tiny_model_dir
):
    reference, _ = load_policy(str(tiny_model_dir))
    again, _ = load_policy(str(bootstrap_tiny_model(alfworld_corpus, tmp_path / "a", tiny_config)))
    other_cfg = dataclasses.replace(tiny_config, seed=1)
    other, _ = load_policy(str(bootstrap_tiny_model(alfworld_corpus, tmp_path / "b", other_cfg)))
    ref_state = reference.state_dict()
    assert all(torch.equal(ref_state[k], v) for k, v in again.state_dict().items())
    assert not torch.equal(
        ref_state["model.embed_tokens.weight"], other.state_dict()["model.embed_tokens.weight"]
    )


def test_bootstrap_leaves_the_global_rng_untouched(tmp_path, alfworld_corpus, tiny_config):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    bootstrap_tiny_model(alfworld_corpus, tmp_path, tiny_config)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize(
    ("field", "value"),
    [("hidden_size", 0), ("num_attention_heads", 3), ("num_key_value_heads", 3)],
)
def test_bad_tiny_config_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        TinyModelConfig(**{field: value})
