"""A model folder's size is read from its config.json before any weight (run/model_folder.py)."""

from __future__ import annotations

import json

from agentcredit.config.checks import ModelSize
from agentcredit.run.model_folder import model_size

#: a Llama of 132,654,080 parameters, described and never allocated
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 1024,
         "intermediate_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 8,
         "num_key_value_heads": 8, "vocab_size": 32000, "tie_word_embeddings": False}


def test_model_size_counts_the_parameters_config_json_describes(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    # embedding 32,000 * 1,024 = 32,768,000; per layer: attention 4 * 1,024^2 = 4,194,304,
    # MLP 3 * 1,024 * 4,096 = 12,582,912, two norms 2,048: 16,779,264, four layers 67,117,056;
    # final norm 1,024; untied output 32,768,000: 132,654,080
    assert model_size(tmp_path) == ModelSize(parameters=132_654_080, vocab=32_000, hidden=1024,
                                            intermediate=4096, layers=4, heads=8, kv_heads=8,
                                            head_dim=128, tied=False)


def test_tied_embeddings_are_counted_once(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, "tie_word_embeddings": True}))
    assert model_size(tmp_path).parameters == 132_654_080 - 32_768_000
