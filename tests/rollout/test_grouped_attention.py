"""grouped_sdpa: transformers' masked sdpa attention without copying key/value heads, and a
Qwen2-style model sampling through it as through an independent (eager) attention."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from agentcredit.rollout.admissible import ActionTrie
from agentcredit.rollout.grouped_attention import GROUPED_SDPA, grouped_attention, grouped_sdpa
from agentcredit.rollout.policy import HFPolicy, PromptCache


class _Attention(torch.nn.Module):
    """What the attention functions read from a transformers attention module."""

    def __init__(self, groups: int):
        super().__init__()
        self.num_key_value_groups, self.is_causal = groups, True


@pytest.mark.parametrize("query_length", [1, 5])
def test_grouped_sdpa_equals_transformers_sdpa_over_repeated_heads(query_length):
    gen = torch.Generator().manual_seed(0)
    batch, heads, kv_heads, length, dim = 3, 6, 2, 9, 8
    query = torch.randn(batch, heads, query_length, dim, generator=gen)
    key, value = (torch.randn(batch, kv_heads, length, dim, generator=gen) for _ in range(2))
    mask = torch.ones(batch, 1, query_length, length, dtype=torch.bool)
    mask[0, :, :, :4] = False  # left padding
    mask[1, :, :, -2:] = False
    mask[2, 0] = torch.ones(query_length, length, dtype=torch.bool).tril(length - query_length)
    module = _Attention(heads // kv_heads)
    expected, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=dim ** -0.5)
    got, _ = grouped_sdpa(module, query, key, value, mask, scaling=dim ** -0.5)
    assert got.shape == (batch, query_length, heads, dim)
    assert torch.allclose(got, expected, atol=1e-6)


def _qwen2(tokenizer, attention: str) -> Qwen2ForCausalLM:
    """A tiny random grouped-query Qwen2 (4 query heads per 2 key/value heads), built here."""
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, tie_word_embeddings=True,
                         pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, attn_implementation=attention)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return Qwen2ForCausalLM(config)


def test_a_qwen2_model_samples_the_same_through_grouped_and_eager_attention(fake_tokenizer):
    tok = fake_tokenizer
    texts = ["You are in room 1.", "go left", "You are in room 1.", "Nothing happens."]
    first = [tok.encode(t, add_special_tokens=False) for t in texts]
    second = [p + tok.encode(" You see an apple.", add_special_tokens=False) for p in first]
    commands = ["go left", "go right", "take apple"]
    results = {}
    for attention in ("sdpa", "eager"):
        model = _qwen2(tok, attention)
        policy, cache = HFPolicy(model, tok), PromptCache()
        results[attention] = [policy.generate(
            prompts, temperature=0.7, max_new_tokens=6,
            generator=torch.Generator().manual_seed(seed), prompt_cache=cache,
            tries=[ActionTrie.from_commands(tok, commands, "bare")] * len(prompts))
            for seed, prompts in enumerate((first, second))]
        assert model.config._attn_implementation == attention  # restored after sampling
    for grouped, eager in zip(*results.values(), strict=True):
        assert [g.token_ids for g in grouped] == [g.token_ids for g in eager]
        for g, e in zip(grouped, eager, strict=True):
            assert g.logprobs == pytest.approx(e.logprobs, abs=1e-5)


def test_grouped_attention_is_used_while_sampling_only(fake_tokenizer):
    model = _qwen2(fake_tokenizer, "sdpa")
    with grouped_attention(model):
        assert model.config._attn_implementation == GROUPED_SDPA
    assert model.config._attn_implementation == "sdpa"
