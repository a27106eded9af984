"""Size and seed of the embedded tiny policy (``model.tiny``). ``train.warm_start.tiny_model``
builds the model; its config lives here so that the run config loads without torch."""

from __future__ import annotations

from dataclasses import dataclass


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
