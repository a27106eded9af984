"""The memory estimate is built from named terms (config/checks.py, ``memory_estimate``):
the hf preset fits Qwen2.5-0.5B and 1.5B on an 80 GB card and refuses 7B, each term's
bytes are the hand-worked count, and a refusal names the term and the setting that fixes it."""

from __future__ import annotations

import json

import pytest

from agentcredit.config import ConfigError, load_config
from agentcredit.config.checks import (
    PREFILL_ROWS,
    ModelSize,
    check_memory,
    embedded_size,
    layer_activation_bytes,
    memory_estimate,
)
from agentcredit.run.model_folder import model_size

CARD = (80_000_000_000, "the GPU cuda:0")
"""An 80 GB card, as ``_check_memory_on_device`` passes it."""

#: the released Qwen2.5 checkpoints' config.json sizes (written out: nothing is downloaded)
QWEN = {
    "0.5B": ModelSize(parameters=494_032_768, vocab=151_936, hidden=896, intermediate=4864,
                      layers=24, heads=14, kv_heads=2, head_dim=64, tied=True),
    "1.5B": ModelSize(parameters=1_543_714_304, vocab=151_936, hidden=1536, intermediate=8960,
                      layers=28, heads=12, kv_heads=2, head_dim=128, tied=True),
    "7B": ModelSize(parameters=7_615_616_512, vocab=152_064, hidden=3584, intermediate=18944,
                    layers=28, heads=28, kv_heads=4, head_dim=128, tied=False),
}


def _qwen_config_json(size: ModelSize) -> dict:
    return {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
            "hidden_size": size.hidden, "intermediate_size": size.intermediate,
            "num_hidden_layers": size.layers, "num_attention_heads": size.heads,
            "num_key_value_heads": size.kv_heads, "vocab_size": size.vocab,
            "tie_word_embeddings": size.tied, "use_sliding_window": False}


@pytest.mark.parametrize("name", ["0.5B", "1.5B"])
def test_the_hf_preset_fits_qwen25_small_models_on_an_80gb_card(name):
    check_memory(load_config("hf"), QWEN[name], CARD)


def test_the_hf_preset_refuses_qwen25_7b_and_points_to_a_smaller_model_or_verl():
    with pytest.raises(ConfigError) as err:
        check_memory(load_config("hf"), QWEN["7B"], CARD)
    line = str(err.value)
    assert "\n" not in line
    # 7,615,616,512 x (4 + 4 + 8) bytes = 121,849,864,192 (113.5 GiB) of state alone
    assert "weights, gradients and AdamW moments alone need 113.5 GiB" in line
    assert "use a smaller model" in line and "docs/verl.md" in line
    assert "the GPU cuda:0 has 74.5 GiB" in line


@pytest.mark.parametrize("name", ["0.5B", "1.5B", "7B"])
def test_model_size_reads_the_qwen25_shapes_from_config_json(tmp_path, name):
    (tmp_path / "config.json").write_text(json.dumps(_qwen_config_json(QWEN[name])))
    assert model_size(tmp_path) == QWEN[name]


def test_a_config_json_without_the_mlp_width_is_refused_in_one_line(tmp_path):
    gpt2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 64,
            "n_layer": 2, "n_head": 4, "vocab_size": 1000}
    (tmp_path / "config.json").write_text(json.dumps(gpt2))
    with pytest.raises(ValueError, match="intermediate_size = None") as err:
        model_size(tmp_path)
    assert "\n" not in str(err.value)


def test_the_embedded_size_is_the_qwen2_model_transformers_builds(tmp_path):
    config = load_config(None, ["model.tiny.hidden_size=96", "model.tiny.num_attention_heads=6",
                                "model.tiny.num_key_value_heads=2",
                                "model.tiny.max_vocab_size=1001"])
    size = embedded_size(config)
    assert size.vocab == 1008  # 1,001 rounded up to a multiple of model.tiny.vocab_multiple (8)
    (tmp_path / "config.json").write_text(json.dumps(_qwen_config_json(size)))
    assert model_size(tmp_path) == size


def test_the_logits_are_counted_for_the_response_columns_only():
    config = load_config("hf")
    ppo = memory_estimate(config, QWEN["1.5B"]).phases["ppo"]
    # optim.micro_batch_size 4 rows x rollout.max_new_tokens 512 columns x 151,936 logits
    # x 4 bytes (float32) x 4 values (logits; softmax, scattered target gradient and their
    # sum in backward): never the 2,048 prompt columns
    assert ppo["logits"] == 4 * 512 * 151_936 * 4 * 4 == 4_978_638_848


def test_one_decoder_layer_keeps_the_hand_counted_bytes_per_token():
    # Qwen2.5-1.5B under bfloat16 autocast (c = 2, residual r = 4): inputs of the two norms
    # 2*4*1536 = 12,288; their float32 normalised values 2*4*1536 = 12,288; five bf16 casts
    # of the norm outputs (q, k, v, gate, up) 5*2*1536 = 15,360; rotated q, repeated k and v,
    # attention output and its copy 5*2*(12*128) = 15,360; gate, up, silu, product
    # 4*2*8960 = 71,680
    assert layer_activation_bytes(QWEN["1.5B"], 2) == 126_976
    # float32: norm outputs shared (2*4*1536), everything at 4 bytes
    assert layer_activation_bytes(QWEN["1.5B"], 4) == (
        4 * 4 * 1536 + 2 * 4 * 1536 + 5 * 4 * 1536 + 4 * 4 * 8960)


def test_gradient_checkpointing_keeps_one_hidden_state_per_layer_and_one_layer_whole():
    on = memory_estimate(load_config("hf"), QWEN["1.5B"]).phases["ppo"]["activations"]
    off = memory_estimate(load_config("hf", ["optim.gradient_checkpointing=false"]),
                          QWEN["1.5B"]).phases["ppo"]["activations"]
    tokens = 4 * (2048 + 512)  # optim.micro_batch_size x (max_prompt_tokens + max_new_tokens)
    assert on == tokens * (28 * 4 * 1536 + 126_976) == 3_061_841_920
    assert off == tokens * 28 * 126_976 == 36_406_558_720


def test_the_generation_cache_holds_the_prompts_beside_the_growing_batch_cache():
    generation = memory_estimate(load_config("hf"), QWEN["1.5B"]).phases["generation"]
    # per token: 28 layers x (k, v) x 2 kv heads x 128 x 2 bytes = 28,672; 64 rows, each with
    # its prompt's own cache (2,048) and the batch cache (2,048 + 512)
    assert generation["kv_cache"] == 64 * (2048 + 2560) * 28_672 == 8_455_716_864
    assert generation["prefill"] == PREFILL_ROWS * 2048 * 126_976
    assert generation["prompt_cache"] == 0.0  # rollout.reuse_prompt_cache is off in hf
    reused = memory_estimate(load_config("hf", ["rollout.reuse_prompt_cache=true"]),
                             QWEN["1.5B"]).phases["generation"]
    assert reused["prompt_cache"] == 8 * 16 * 2048 * 28_672  # every running rollout's prompt


def test_the_held_state_is_float32_for_the_trained_policy_and_the_dtype_for_the_reference():
    p = 1_543_714_304
    held = memory_estimate(load_config("hf"), QWEN["1.5B"]).held
    assert (held["weights"], held["gradients"], held["adam"]) == (4 * p, 4 * p, 8 * p)
    assert held["autocast"] == held["reference"] == 2 * p  # bfloat16 casts; bfloat16 reference
    plain = memory_estimate(load_config("hf", ["model.dtype=float32", "optim.kl_coef=0"]),
                            QWEN["1.5B"]).held
    assert (plain["weights"], plain["autocast"], plain["reference"]) == (4 * p, 0.0, 0.0)


def test_the_peak_adds_only_the_largest_phase_to_the_held_state():
    estimate = memory_estimate(load_config("hf"), QWEN["1.5B"])
    phases = {name: sum(terms.values()) for name, terms in estimate.phases.items()}
    assert set(phases) == {"generation", "scoring", "ppo"}  # sft.enabled is false in hf
    assert estimate.total == sum(estimate.held.values()) + max(phases.values())
    assert estimate.peak_phase == max(phases, key=phases.__getitem__)


def test_sft_is_counted_only_when_the_warm_start_runs():
    config = load_config("hf", ["sft.enabled=true", "sft.micro_batch_size=2"])
    sft = memory_estimate(config, QWEN["1.5B"]).phases["sft"]
    assert sft["logits"] == 2 * 512 * 151_936 * 4 * 4


@pytest.mark.parametrize(("overrides", "term", "fix"), [
    (["optim.gradient_checkpointing=false", "optim.micro_batch_size=8"], "ppo.activations",
     "set optim.gradient_checkpointing=true or lower optim.micro_batch_size"),
    (["optim.micro_batch_size=64"], "ppo.logits", "lower optim.micro_batch_size"),
    (["rollout.generation_batch_size=1024"], "generation.kv_cache",
     "lower rollout.generation_batch_size"),
    (["optim.score_micro_batch_size=256"], "scoring.logits",
     "lower optim.score_micro_batch_size"),
])
def test_a_refusal_names_the_largest_term_and_the_setting_that_shrinks_it(overrides, term,
                                                                          fix):
    with pytest.raises(ConfigError) as err:
        check_memory(load_config("hf", overrides), QWEN["1.5B"], CARD)
    line = str(err.value)
    assert f"the largest part is {term}: {fix}" in line
    assert "GiB of memory" in line and "has 74.5 GiB" in line and "\n" not in line


def test_a_model_whose_state_fits_but_not_its_run_is_told_to_drop_the_reference():
    size = QWEN["7B"]
    half = ModelSize(**{**size.__dict__, "parameters": size.parameters // 2})
    with pytest.raises(ConfigError, match="the largest part is adam") as err:
        check_memory(load_config("hf"), half, CARD)
    # the state alone, 3,807,808,256 x 16 bytes = 60.9 GB, fits: no verl, but the reference
    # (3,807,808,256 x 2 bytes = 7.1 GiB) can go, as grpo does not read it
    line = str(err.value)
    assert "docs/verl.md" not in line
    assert line.endswith("use a smaller model, or set optim.kl_coef=0 (no reference copy: "
                         "7.1 GiB less)")


def test_the_sampler_prefills_as_many_rows_as_the_estimate_counts():
    from agentcredit.rollout import policy

    assert policy.PREFILL_ROWS == PREFILL_ROWS
