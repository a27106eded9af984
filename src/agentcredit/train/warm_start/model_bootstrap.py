"""The embedded tiny policy: a randomly initialised Qwen2 with a locally trained tokenizer.

docs/design.md: on a laptop the whole pipeline runs on a tiny transformer on the CPU.
``bootstrap_tiny_model`` writes an ordinary Hugging Face checkpoint directory
(``config.json``, ``model.safetensors``, ``generation_config.json``,
``tokenizer.json``, ``tokenizer_config.json``, ``chat_template.jinja``), so the
rest of the code loads it through ``load_policy`` exactly as it loads
``Qwen/Qwen2.5-1.5B-Instruct``: same architecture family, same special tokens,
same chat template. Nothing is downloaded.

The defaults (hidden 128, 2 layers, 4 heads, vocabulary of a few hundred to a
few thousand tokens) give roughly 0.5–1 M parameters: a forward+backward pass
over a batch of multi-turn ALFWorld trajectories takes well under a second on
a CPU core, and the model is big enough for an SFT warm start to learn the
action format.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch
from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

from agentcredit.config.tiny_model import TinyModelConfig
from agentcredit.disk_full import writing
from agentcredit.train.warm_start.tokenizer_bootstrap import (
    IM_END_TOKEN,
    PAD_TOKEN,
    train_bpe_tokenizer,
)


def bootstrap_tiny_model(texts: Iterable[str], out_dir: Path, config: TinyModelConfig) -> Path:
    """Train a tokenizer on ``texts``, build a random Qwen2 around it and save both to ``out_dir``.

    Args:
        texts: environment strings (observations, actions, instructions),
            consumed once.
        out_dir: directory to write the checkpoint into (created if missing;
            files of the same names are overwritten).
        config: sizes and seed.

    Returns:
        ``out_dir``, loadable with ``load_policy(str(out_dir))``.

    The vocabulary size is ``len(tokenizer)`` rounded up to
    ``config.vocab_multiple``; the spare rows are never produced by the
    tokenizer. ``pad_token_id`` = ``bos_token_id`` = ``<|endoftext|>`` and
    ``eos_token_id`` = ``<|im_end|>`` as in Qwen2.5-Instruct; generation stops
    on either. Embeddings are tied to the output head. The global torch RNG is
    left untouched: initialisation runs under a forked RNG seeded with
    ``config.seed``.
    """
    out_dir = Path(out_dir)
    tokenizer = train_bpe_tokenizer(
        texts,
        vocab_size=config.max_vocab_size,
        min_frequency=config.min_frequency,
        model_max_length=config.max_position_embeddings,
    )
    pad_id = tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    eos_id = tokenizer.convert_tokens_to_ids(IM_END_TOKEN)
    vocab_size = -(-len(tokenizer) // config.vocab_multiple) * config.vocab_multiple

    model_config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        max_position_embeddings=config.max_position_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": config.rope_theta},
        initializer_range=config.initializer_range,
        tie_word_embeddings=True,
        use_sliding_window=False,
        pad_token_id=pad_id,
        bos_token_id=pad_id,
        eos_token_id=eos_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = Qwen2ForCausalLM(model_config)
    model.generation_config = GenerationConfig(
        bos_token_id=pad_id,
        pad_token_id=pad_id,
        eos_token_id=[eos_id, pad_id],
    )

    out_dir.mkdir(parents=True, exist_ok=True)
    with writing(out_dir):
        model.save_pretrained(out_dir)
        tokenizer.save_pretrained(out_dir)
    return out_dir
