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
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

from agentcredit.disk_full import writing
from agentcredit.train.tokenizer_bootstrap import IM_END_TOKEN, PAD_TOKEN, train_bpe_tokenizer


@dataclass
class TinyModelConfig:
    """Size and seed of the embedded tiny policy; every field is validated at construction."""

    hidden_size: int = 128
    """Width of the residual stream (Qwen2 ``hidden_size``); divisible by
    ``num_attention_heads``."""
    num_hidden_layers: int = 2
    """Number of transformer blocks."""
    num_attention_heads: int = 4
    """Query heads per block; head dim = ``hidden_size / num_attention_heads``."""
    num_key_value_heads: int = 2
    """Key/value heads (grouped-query attention, as in Qwen2); divides ``num_attention_heads``."""
    intermediate_size: int = 512
    """Width of the SwiGLU MLP."""
    max_position_embeddings: int = 2048
    """Longest token sequence (prompt + all turns) the model accepts; RoPE, so only a limit."""
    max_vocab_size: int = 4096
    """Upper bound on the BPE vocabulary; a small corpus stops earlier (see ``min_frequency``)."""
    min_frequency: int = 2
    """A symbol pair must occur this often in the corpus to become a merged token."""
    vocab_multiple: int = 8
    """The embedding table has ``len(tokenizer)`` rows rounded up to a multiple of this."""
    rope_theta: float = 10000.0
    """RoPE base frequency."""
    initializer_range: float = 0.02
    """Std of the normal random initialisation of the weights."""
    seed: int = 0
    """Seed of the weight initialisation; the same seed and corpus give identical weights."""

    def __post_init__(self) -> None:
        positive = (
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "intermediate_size",
            "max_position_embeddings",
            "min_frequency",
            "vocab_multiple",
        )
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"TinyModelConfig.{name}={value!r}: must be an integer >= 1")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"TinyModelConfig.hidden_size={self.hidden_size} must be divisible by "
                f"num_attention_heads={self.num_attention_heads}"
            )
        if (self.hidden_size // self.num_attention_heads) % 2:
            raise ValueError(
                f"TinyModelConfig: head dim hidden_size/num_attention_heads="
                f"{self.hidden_size // self.num_attention_heads} must be even (RoPE rotates pairs)"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"TinyModelConfig.num_key_value_heads={self.num_key_value_heads} must divide "
                f"num_attention_heads={self.num_attention_heads}"
            )
        if self.max_vocab_size < 259:
            raise ValueError(
                f"TinyModelConfig.max_vocab_size={self.max_vocab_size}: must be >= 259 "
                "(256 byte symbols + 3 special tokens)"
            )
        if self.rope_theta <= 0 or self.initializer_range <= 0:
            raise ValueError(
                f"TinyModelConfig: rope_theta={self.rope_theta} and "
                f"initializer_range={self.initializer_range} must be > 0"
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
