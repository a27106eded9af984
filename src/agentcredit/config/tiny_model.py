"""Size and seed of the embedded tiny policy (``model.tiny``).
``train.warm_start.model_bootstrap`` builds the model; its config lives here so that the run
config loads without torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agentcredit.config.schema import SEED_MAX, ConfigError, validate


@dataclass
class TinyModelConfig:
    """Size and seed of the embedded tiny policy; every field is validated at construction
    (``_limits``), so a size the Qwen2 architecture would reject, or one absurd for a CPU
    model, is a one-line ``ConfigError`` naming the key."""

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
    """A symbol pair must occur this often in the corpus to become a merged token (at most a
    million: past that no pair of a training corpus merges)."""
    vocab_multiple: int = 8
    """The embedding table has ``len(tokenizer)`` rows rounded up to a multiple of this."""
    rope_theta: float = 10000.0
    """RoPE base frequency."""
    initializer_range: float = 0.02
    """Std of the normal random initialisation of the weights."""
    seed: int = 0
    """Seed of the weight initialisation; the same seed and corpus give identical weights."""

    _limits: ClassVar[dict[str, tuple]] = {
        # Upper bounds a CPU-sized model never nears; the memory estimate
        # (config/checks.py) judges what fits within them.
        "hidden_size": (1, 16384), "num_hidden_layers": (1, 256),
        "num_attention_heads": (1, 256), "num_key_value_heads": (1, 256),
        "intermediate_size": (1, 65536), "max_position_embeddings": (1, 1 << 20),
        "max_vocab_size": (259, 1 << 18), "min_frequency": (1, 1_000_000),
        "vocab_multiple": (1, 1024),
        "rope_theta": (0.0, 1e9, "open"), "initializer_range": (0.0, 1.0, "open"),
        "seed": (0, SEED_MAX),
    }

    def __post_init__(self) -> None:
        validate(self)
        heads, kv_heads = self.num_attention_heads, self.num_key_value_heads
        if self.hidden_size % heads:
            raise ConfigError(f"TinyModelConfig.num_attention_heads = {heads} must divide "
                              f"hidden_size = {self.hidden_size} (head dim = hidden_size / heads)")
        if (self.hidden_size // heads) % 2:
            raise ConfigError(f"TinyModelConfig.num_attention_heads = {heads} gives an odd head "
                              f"dim {self.hidden_size // heads}; RoPE rotates pairs, so "
                              "hidden_size / num_attention_heads must be even")
        if heads % kv_heads:
            raise ConfigError(f"TinyModelConfig.num_key_value_heads = {kv_heads} must divide "
                              f"num_attention_heads = {heads}")
