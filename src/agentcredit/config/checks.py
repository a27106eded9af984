"""The checks that cross sections, run once after a config is built (``check_config``).

Each section checks its own fields at construction; these check what one section
cannot see alone: the estimator and the auxiliary loss are registered and the options build,
the environment is registered and ``eval.splits`` are its splits, the rollouts record what
the estimator's inputs are built from, and the skill settings fit the teacher.
Then the values whose bound depends on the machine or on other keys (``_check_values``;
each key's own range, its text and its URL are checked by ``schema.validate``): an LLM
user needs an endpoint, the threads are bounded by the machine's cores, the mini-batches
by the rows an update has, and the memory the run would need is estimated before anything
is allocated, and said when it is refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from agentcredit.config.environment import POOL
from agentcredit.config.schema import ConfigError, did_you_mean, to_dict
from agentcredit.config.sections import TrainConfig, estimator_config
from agentcredit.envs.suites import env_suite_names, suite_splits


def check_config(config: TrainConfig) -> None:
    """Run every cross-section check on ``config`` (``credit.options`` is rewritten as built).

    Raises:
        ConfigError: one line naming the keys that do not fit together and the fix.
    """
    _check_credit(config)
    _check_env(config)
    _check_inputs(config)
    _check_skill_settings(config)
    _check_values(config)


def _check_credit(config: TrainConfig) -> None:
    """The estimator and the auxiliary loss exist, and the options build the estimator's config."""
    from agentcredit.credit import estimator_names
    from agentcredit.credit.aux_losses import aux_loss_names

    credit = config.credit
    if credit.estimator not in estimator_names():
        raise ConfigError(f"credit.estimator = {credit.estimator!r} is not registered"
                          f"{did_you_mean(credit.estimator, estimator_names())} "
                          f"(known: {', '.join(estimator_names())})")
    built = estimator_config(credit)
    # the options as built: YAML's `off` (read as false) is the word again, a name its config
    credit.options = {key: to_dict(getattr(built, key)) for key in credit.options}
    losses = ["none", *aux_loss_names()]
    if config.optim.aux_loss not in losses:
        raise ConfigError(f"optim.aux_loss = {config.optim.aux_loss!r} is not allowed; choose "
                          f"one of {', '.join(losses)}"
                          f"{did_you_mean(config.optim.aux_loss, losses)}")


def _check_env(config: TrainConfig) -> None:
    """``env.name`` is a registered environment and ``eval.splits`` are its splits."""
    names = env_suite_names()
    if config.env.name not in names:
        raise ConfigError(f"env.name = {config.env.name!r} is not a registered environment"
                          f"{did_you_mean(config.env.name, names)} (known: {', '.join(names)})")
    splits = suite_splits(config.env.name)
    for split in config.eval.splits:
        if split == POOL and not config.env.pool_games_per_type:
            raise ConfigError("eval.splits: 'pool' is the RL pool's games, but there is no pool; "
                              "set env.pool_games_per_type (for example 4)")
        if split not in (*splits, POOL):
            raise ConfigError(f"eval.splits: {split!r} is not a split of {config.env.name} "
                              f"(choose from {', '.join(splits)}, pool)"
                              f"{did_you_mean(split, splits)}")


def _check_inputs(config: TrainConfig) -> None:
    """The rollouts record what the declared inputs are built from."""
    if "traces" in config.inputs and not config.rollout.record_snapshots:
        raise ConfigError(f"credit.estimator = {config.credit.estimator!r} traces rollouts "
                          "through their verifiers, which needs the state snapshots; set "
                          "rollout.record_snapshots=true")


def _check_skill_settings(config: TrainConfig) -> None:
    """The skill and teacher settings fit together (docs/adrs.md §5.1, 5.6).

    Evaluation skills belong to the skill-prompt baselines (``skill_prompt``,
    ``skill_grpo*``); a run with the privileged teacher (ADRS, OPSD, SDAR) learns from the
    skill so that inference never needs it, and is evaluated without it.
    """
    if config.eval.skills and config.uses_teacher:
        raise ConfigError("eval.skills = true shows the skill at evaluation, but "
                          f"credit.estimator = {config.credit.estimator!r} with optim.aux_loss = "
                          f"{config.optim.aux_loss!r} trains with a privileged teacher and is "
                          "evaluated without skills: set eval.skills=false (skills at evaluation "
                          "are the skill_prompt and skill_grpo* baselines)")
    if config.uses_teacher and config.rollout.skills:
        raise ConfigError("rollout.skills = true shows the skill to the acting policy, but "
                          f"credit.estimator = {config.credit.estimator!r} with optim.aux_loss = "
                          f"{config.optim.aux_loss!r} runs a privileged teacher that needs "
                          "skill-free rollouts; set rollout.skills=false (or use "
                          "method=skill_grpo without a teacher)")


GIB = 1 << 30


def _check_values(config: TrainConfig) -> None:
    """The endpoint an LLM user needs, the counts and the memory (module notes)."""
    _check_endpoints(config)
    _check_counts(config)
    check_memory(config)


def _check_endpoints(config: TrainConfig) -> None:
    """An LLM user has an endpoint (each URL itself is parsed by ``schema.validate``)."""
    options = config.env.options
    endpoint = getattr(options, "user_endpoint", None)
    if endpoint is not None and options.user == "llm" and not endpoint.base_url:
        raise ConfigError("env.tau.user = 'llm' plays the customer with a chat model, but "
                          "env.tau.user_endpoint.base_url is empty; set it (for example "
                          "env.tau.user_endpoint.base_url=http://localhost:8000/v1) or use "
                          "env.tau.user=scripted")


def _check_counts(config: TrainConfig) -> None:
    """Counts bounded by the machine or by other keys, within their own ranges."""
    cores = os.cpu_count() or 1
    threads = max(16, 4 * cores)  # oversubscribing a little is harmless; thousands are not
    if config.run.threads > threads:
        raise ConfigError(f"run.threads = {config.run.threads} is over {threads}, four times "
                          f"this machine's {cores} CPU cores; set run.threads={cores} or lower "
                          "(0 = torch's default)")
    rollouts = config.rollout.group_size * config.rollout.tasks_per_update
    rows = rollouts * config.rollout.max_steps
    if config.optim.mini_batches > rows:
        raise ConfigError(f"optim.mini_batches = {config.optim.mini_batches} is more than the "
                          f"{rows} training rows an update can have (rollout.group_size x "
                          "rollout.tasks_per_update x rollout.max_steps); lower it")


@dataclass(frozen=True)
class ModelSize:
    """The shapes of a Qwen2 / Llama-style decoder that the memory estimate reads, from a
    checkpoint's ``config.json`` (``run.model_folder.model_size``) or ``model.tiny``
    (``embedded_size``)."""

    parameters: int
    """``P``: the parameter count (tied parameters once)."""
    vocab: int
    """``V``: rows of the input embedding, the width of the logits."""
    hidden: int
    """``h``: width of the residual stream (``hidden_size``)."""
    intermediate: int
    """``i``: width of the SwiGLU MLP (``intermediate_size``)."""
    layers: int
    """``n_L``: decoder layers (``num_hidden_layers``)."""
    heads: int
    """``n_q``: query heads per layer (``num_attention_heads``)."""
    kv_heads: int
    """``n_kv``: key/value heads per layer (``num_key_value_heads``; grouped-query attention)."""
    head_dim: int
    """``d``: width of one head (``head_dim``, else ``h / n_q``)."""
    tied: bool
    """The output head is the input embedding (``tie_word_embeddings``), counted once in ``P``."""


DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
"""Bytes per value of each ``model.dtype``."""
FP32 = 4
"""Bytes of a float32: the trained policy's weights, gradients, AdamW moments and residual
stream (``train/precision.py``), and the log-softmax statistics."""
LOGIT_VALUES_TRAINED = 4
"""float32 values per logit of a forward that is trained (PPO, SFT): the logits, and in
backward the softmax that log-softmax's gradient is formed from, the target's scattered
gradient and their sum."""
LOGIT_VALUES_SCORED = 2
"""float32 values per logit of a scoring pass (no gradient): the logits and the float32 copy
log-softmax reads (tempered, restricted to the admissible set)."""
PREFILL_ROWS = 8
"""Distinct prompts the sampler prefills in one forward (``rollout.policy.PREFILL_ROWS``)."""


def embedded_size(config: TrainConfig) -> ModelSize:
    """The shapes of the embedded Qwen2 model ``model.tiny`` describes, its vocabulary at its
    largest (``max_vocab_size`` rounded up to ``vocab_multiple``); the head is tied."""
    tiny = config.model.tiny
    h, i, head_dim = tiny.hidden_size, tiny.intermediate_size, \
        tiny.hidden_size // tiny.num_attention_heads
    vocab = -(-tiny.max_vocab_size // tiny.vocab_multiple) * tiny.vocab_multiple
    q, kv = tiny.num_attention_heads * head_dim, tiny.num_key_value_heads * head_dim
    # q, k, v with biases; o without; gate, up, down; two norms
    per_layer = (h * q + q) + 2 * (h * kv + kv) + q * h + 3 * h * i + 2 * h
    return ModelSize(parameters=vocab * h + tiny.num_hidden_layers * per_layer + h, vocab=vocab,
                     hidden=h, intermediate=i, layers=tiny.num_hidden_layers,
                     heads=tiny.num_attention_heads, kv_heads=tiny.num_key_value_heads,
                     head_dim=head_dim, tied=True)


def reference_loaded(config: TrainConfig) -> bool:
    """Whether the run holds the frozen reference policy: ``optim.kl_coef`` > 0 or the
    estimator (or auxiliary loss) reads it."""
    return config.optim.kl_coef > 0 or "reference" in config.inputs


def layer_activation_bytes(size: ModelSize, compute: int) -> int:
    """``a``: bytes one token keeps for backward in one decoder layer of the trained policy, its
    matmuls in ``compute`` bytes (``c``) and its residual stream in float32 (``r`` = 4):

        a = 2 r h + 2·4 h + k c h + 5 c n_q d + 4 c i

    ``2 r h``: the layer's input and the residual after attention, each read by an RMSNorm;
    ``2·4 h``: each norm's float32 normalised value (its weight's gradient reads it);
    ``k c h``: the projections' inputs, the norm outputs (``k`` = 2 in float32, where q/k/v and
    gate/up share them; 5 under autocast, where each projection keeps its own cast);
    ``5 c n_q d``: the rotated queries, the keys and values repeated to every query head (the
    attention runs with a padding mask, so transformers repeats them), the attention output and
    its contiguous copy; ``4 c i``: the MLP's gate, up, ``silu(gate)`` and their product.
    """
    h, c = size.hidden, compute
    casts = 2 if compute == FP32 else 5
    return (2 * FP32 * h + 2 * FP32 * h + casts * c * h + 5 * c * size.heads * size.head_dim
            + 4 * c * size.intermediate)


def kv_bytes_per_token(size: ModelSize, compute: int) -> int:
    """Bytes of one token's keys and values in every layer: ``n_L · 2 · n_kv · d · c``."""
    return size.layers * 2 * size.kv_heads * size.head_dim * compute


def activation_bytes(size: ModelSize, compute: int, rows: int, length: int,
                     checkpointing: bool) -> float:
    """Bytes a trained forward over ``rows`` x ``length`` tokens keeps for backward: every
    layer's ``a`` per token; with gradient checkpointing each layer keeps only its float32
    input and one layer's ``a`` exists at a time, during its recompute."""
    tokens = float(rows) * length
    per_layer = layer_activation_bytes(size, compute)
    if checkpointing:
        return tokens * (size.layers * FP32 * size.hidden + per_layer)
    return tokens * size.layers * per_layer


def logit_bytes(size: ModelSize, rows: int, columns: int, values: int) -> float:
    """Bytes of the logits of ``rows`` x ``columns`` scored tokens, ``values`` float32 each:
    the LM head runs only on the columns that predict response tokens (``logits_to_keep``)."""
    return float(rows) * columns * size.vocab * FP32 * values


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a run holds at its peak, by named term.

    Phases run one after another and free their tensors before the next starts, so the peak is
    what is held through the whole update plus the largest phase.

    Attributes:
        held: the terms held throughout: ``weights``, ``gradients``, ``adam`` (the trained
            policy, float32), ``autocast`` (its bfloat16 weight casts under
            ``model.dtype=bfloat16``), ``reference`` (the frozen copy in ``model.dtype``),
            ``rollouts`` (the update's token tensors).
        phases: each phase's own terms: ``generation`` (sampling), ``scoring`` (old,
            reference and teacher log-probs, no gradient), ``ppo`` (one micro-batch's forward
            and backward), ``sft`` (the same for the warm start, when ``sft.enabled``).
    """

    held: dict[str, float]
    phases: dict[str, dict[str, float]]

    @property
    def peak_phase(self) -> str | None:
        """The phase that needs the most, or None where no phase is counted."""
        if not self.phases:
            return None
        return max(self.phases, key=lambda name: sum(self.phases[name].values()))

    @property
    def terms(self) -> dict[str, float]:
        """The terms of the peak: the held ones, then the peak phase's as ``phase.term``."""
        peak = self.peak_phase
        phase = self.phases[peak] if peak else {}
        return {**self.held, **{f"{peak}.{name}": value for name, value in phase.items()}}

    @property
    def total(self) -> float:
        """Bytes at the peak."""
        return sum(self.terms.values())


def memory_estimate(config: TrainConfig, size: ModelSize | None = None) -> MemoryEstimate:
    """The bytes the run would hold at its peak, term by term (``MemoryEstimate``;
    docs/settings.md, "Memory a run needs").

    ``size`` is a checkpoint's, read from its ``config.json`` before its weights load; without
    it, the embedded model's (``embedded_size``), and for a checkpoint not yet read only the
    rollouts: a lower bound, checked again once the checkpoint is read.

    Symbols: ``P`` parameters, ``c`` bytes of ``model.dtype``, ``L = max_prompt_tokens +
    max_new_tokens`` (``T_p + T_r``), ``a`` (``layer_activation_bytes``), ``kv``
    (``kv_bytes_per_token``).
    """
    rollout, optim = config.rollout, config.optim
    held = {"rollouts": rollout_bytes(config, rollout.tasks_per_update)}
    if size is None and config.model.name == "embedded":
        size = embedded_size(config)
    if size is None:
        return MemoryEstimate(held=held, phases={})
    c = DTYPE_BYTES[config.model.dtype]
    prompt, response = rollout.max_prompt_tokens, rollout.max_new_tokens
    length = prompt + response
    p = float(size.parameters)
    held = {"weights": p * FP32, "gradients": p * FP32, "adam": 2 * p * FP32,
            "autocast": p * c if c < FP32 else 0.0,
            "reference": p * c if reference_loaded(config) else 0.0, **held}
    kv = kv_bytes_per_token(size, c)
    one_layer = layer_activation_bytes(size, c)
    generation = {
        # the prompts' own caches beside the left-padded batch cache that grows to L
        "kv_cache": float(rollout.generation_batch_size) * (prompt + length) * kv,
        "prefill": float(min(PREFILL_ROWS, rollout.generation_batch_size)) * prompt * one_layer,
        "prompt_cache": (float(rollout.group_size * rollout.tasks_per_update) * prompt * kv
                         if rollout.reuse_prompt_cache else 0.0),
    }
    score_rows = optim.score_micro_batch_size
    scoring = {"kv_cache": float(score_rows) * length * kv,
               "layer": float(score_rows) * length * one_layer,
               "logits": logit_bytes(size, score_rows, response, LOGIT_VALUES_SCORED)}
    phases = {"generation": generation, "scoring": scoring,
              "ppo": {"activations": activation_bytes(size, c, optim.micro_batch_size, length,
                                                      optim.gradient_checkpointing),
                      "logits": logit_bytes(size, optim.micro_batch_size, response,
                                            LOGIT_VALUES_TRAINED)}}
    if config.sft.enabled:
        rows = config.sft.micro_batch_size
        phases["sft"] = {"activations": activation_bytes(size, c, rows, length,
                                                         optim.gradient_checkpointing),
                         "logits": logit_bytes(size, rows, response, LOGIT_VALUES_TRAINED)}
    return MemoryEstimate(held=held, phases=phases)


def rollout_bytes(config: TrainConfig, groups: int) -> float:
    """Bytes ``groups`` task groups of rollouts hold: ``rollout.group_size`` x
    ``rollout.max_steps`` rows each, every row's prompt and response tokens as four 8-byte
    values (token id, masks, log-prob)."""
    rollout = config.rollout
    rows = groups * rollout.group_size * rollout.max_steps
    return float(rows) * (rollout.max_prompt_tokens + rollout.max_new_tokens) * 8 * 4


def machine_memory() -> int | None:
    """Bytes of memory this machine has, or ``None`` where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def check_memory(config: TrainConfig, size: ModelSize | None = None,
                 memory: tuple[int, str] | None = None) -> None:
    """Refuse a run whose ``memory_estimate`` exceeds the memory that holds it, in one line
    naming the total, the memory, the largest term and the setting that shrinks it.

    Args:
        size: a checkpoint's shapes (see ``memory_estimate``).
        memory: the bytes that hold the model and what they are (a GPU's, on ``cuda``);
            ``machine_memory()`` of "this machine" when None.
    """
    available, where = memory or (machine_memory(), "this machine")
    if available is None:
        return  # no way to know the machine's memory here: nothing to compare with
    estimate = memory_estimate(config, size)
    total = estimate.total
    if total <= available:
        return
    terms = {name: value for name, value in estimate.terms.items() if value}
    largest = max(terms, key=terms.__getitem__)
    parts = ", ".join(f"{name} {value / GIB:,.1f}" for name, value in terms.items())
    phase = f" in its {estimate.peak_phase} phase" if estimate.peak_phase else ""
    raise ConfigError(f"this run needs about {total / GIB:,.1f} GiB of memory{phase} "
                      f"({parts} GiB) and {where} has {available / GIB:,.1f} GiB; the largest "
                      f"part is {largest}: "
                      f"{_memory_fix(config, estimate, largest, available, size is None)}")


def _memory_fix(config: TrainConfig, estimate: MemoryEstimate, term: str, available: int,
                embedded: bool) -> str:
    """The setting that shrinks ``term`` of ``estimate`` (a name of ``MemoryEstimate.terms``);
    ``embedded``: the model is the one ``model.tiny`` sizes, not a checkpoint."""
    smaller = ("lower model.tiny.hidden_size, model.tiny.num_hidden_layers or "
               "model.tiny.max_vocab_size" if embedded else "use a smaller model")
    state = sum(estimate.held.get(key, 0.0) for key in ("weights", "gradients", "adam"))
    if state > available:
        return (f"the trained policy's float32 weights, gradients and AdamW moments alone need "
                f"{state / GIB:,.1f} GiB; {smaller}"
                + ("" if embedded else ", or train on several GPUs with verl (docs/verl.md)"))
    reference = estimate.held.get("reference", 0.0)
    if reference and "reference" not in config.inputs:
        smaller += (f", or set optim.kl_coef=0 (no reference copy: {reference / GIB:,.1f} GiB "
                    "less)")
    checkpointing = "" if config.optim.gradient_checkpointing else \
        "set optim.gradient_checkpointing=true or "
    fixes = {
        "rollouts": "lower rollout.group_size, rollout.tasks_per_update, rollout.max_steps or "
                    "rollout.max_prompt_tokens",
        "generation.kv_cache": "lower rollout.generation_batch_size",
        "generation.prefill": "lower rollout.max_prompt_tokens",
        "generation.prompt_cache": "set rollout.reuse_prompt_cache=false",
        "ppo.activations": checkpointing + "lower optim.micro_batch_size",
        "ppo.logits": "lower optim.micro_batch_size (or rollout.max_new_tokens)",
        "sft.activations": checkpointing + "lower sft.micro_batch_size",
        "sft.logits": "lower sft.micro_batch_size (or rollout.max_new_tokens)",
    }
    if term.startswith("scoring."):
        return "lower optim.score_micro_batch_size"
    # weights, gradients, adam, autocast, reference: the model's own size
    return fixes.get(term, smaller)
