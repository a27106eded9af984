"""The checks that cross sections, run once after a config is built (``check_config``).

Each section checks its own fields at construction; these check what one section
cannot see alone: the estimator and the auxiliary loss are registered and the options build,
the environment is registered and ``eval.splits`` are its splits, the rollouts record what
the estimator's inputs are built from, and the skill settings fit the teacher.
Then the values that would otherwise reach deep code unchecked (``_check_values``):
text that no file name may hold, endpoint URLs parsed now, a local-looking model path
that does not exist, and sizes bounded by what the machine can hold: the memory the
run would need is estimated before anything is allocated, and said when it is refused.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass

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
        if split == "pool" and not config.env.pool_games_per_type:
            raise ConfigError("eval.splits: 'pool' is the RL pool's games, but there is no pool; "
                              "set env.pool_games_per_type (for example 4)")
        if split not in (*splits, "pool"):
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
SFT_EPOCHS_MAX = 100
"""More passes over the same expert steps than this only overfit (and run for hours)."""
GAMES_MAX = 10_000
"""Most generated games per task type and split (each takes seconds to build and plan)."""
PRODUCTS_MAX = 1_000_000
"""Most generated WebShop products (the catalog is held in memory and indexed)."""


def _check_values(config: TrainConfig) -> None:
    """Text, URLs, the model path and sizes (module notes)."""
    for key, value in (("run.name", config.run.name), ("run.output_dir", config.run.output_dir),
                       ("model.name", config.model.name)):
        if "\x00" in value:
            raise ConfigError(f"{key} = {value!r} holds a NUL character, which no file name can "
                              f"hold; set {key} to plain text")
    _check_endpoints(config)
    _check_counts(config)
    check_memory(config)


def _check_endpoints(config: TrainConfig) -> None:
    """Every endpoint URL parses as ``http(s)://host[:port]/...``; an LLM user has one."""
    urls = []
    tau = getattr(config.env.options, "user_endpoint", None)
    if tau is not None:
        options = config.env.options
        if options.user == "llm" and not options.user_endpoint.base_url:
            raise ConfigError("env.tau.user = 'llm' plays the customer with a chat model, but "
                              "env.tau.user_endpoint.base_url is empty; set it (for example "
                              "env.tau.user_endpoint.base_url=http://localhost:8000/v1) or use "
                              "env.tau.user=scripted")
        urls += [("env.tau.user_endpoint.base_url", options.user_endpoint.base_url),
                 ("env.tau.judge_endpoint.base_url", options.judge_endpoint.base_url)]
    retriever = getattr(config.env.options, "retriever_url", None)
    if retriever is not None:
        urls.append(("env.searchqa.retriever_url", retriever))
    for key, url in urls:
        if url:
            problem = url_problem(url)
            if problem:
                raise ConfigError(f"{key} = {url!r} is not a usable URL ({problem}); give one "
                                  "like http://localhost:8000/v1")


def url_problem(url: str) -> str:
    """Why ``url`` cannot be requested (``"no host"``, ``"port 99999 is out of range"``), or
    ``""``: what the HTTP clients would otherwise find only at their first request."""
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        return "it holds a space or a control character"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (parsing the port is the check: 'host:99999' raises)
    except ValueError as err:
        return str(err)
    if parts.scheme not in ("http", "https"):
        return f"the scheme is {parts.scheme or 'missing'!r}, not http or https"
    if not parts.hostname:
        return "no host"
    return ""


def _check_counts(config: TrainConfig) -> None:
    """Counts whose cost is time, not memory, bounded by the machine or by use."""
    cores = os.cpu_count() or 1
    threads = max(16, 4 * cores)  # oversubscribing a little is harmless; thousands are not
    if config.run.threads > threads:
        raise ConfigError(f"run.threads = {config.run.threads} is over {threads}, four times "
                          f"this machine's {cores} CPU cores; set run.threads={cores} or lower "
                          "(0 = torch's default)")
    if config.sft.epochs > SFT_EPOCHS_MAX:
        raise ConfigError(f"sft.epochs = {config.sft.epochs:g} is over {SFT_EPOCHS_MAX}; more "
                          "passes over the same expert steps only overfit: lower it")
    for key in ("train_games_per_type", "valid_games_per_type", "pool_games_per_type"):
        if getattr(config.env, key) > GAMES_MAX:
            raise ConfigError(f"env.{key} = {getattr(config.env, key)} is over {GAMES_MAX:,} "
                              "games per task type; lower it")
    products = getattr(config.env.options, "num_products", None)
    if products is not None and products > PRODUCTS_MAX:
        raise ConfigError(f"env.webshop.num_products = {products} is over {PRODUCTS_MAX:,}; "
                          "lower it")
    rollouts = config.rollout.group_size * config.rollout.tasks_per_update
    rows = rollouts * config.rollout.max_steps
    if config.optim.mini_batches > rows:
        raise ConfigError(f"optim.mini_batches = {config.optim.mini_batches} is more than the "
                          f"{rows} training rows an update can have (rollout.group_size x "
                          "rollout.tasks_per_update x rollout.max_steps); lower it")


@dataclass(frozen=True)
class ModelSize:
    """What the memory estimate needs to know of a policy model."""

    parameters: int
    """Its parameter count (tied parameters once)."""
    vocab: int
    """Rows of its input embedding: the width of its logits."""


DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
"""Bytes per value of each ``model.dtype``."""


def embedded_size(config: TrainConfig) -> ModelSize:
    """The size of the embedded model ``model.tiny`` describes, its vocabulary at the most."""
    tiny = config.model.tiny
    hidden, vocab = tiny.hidden_size, tiny.max_vocab_size
    per_layer = 4 * hidden * hidden + 3 * hidden * tiny.intermediate_size
    return ModelSize(parameters=vocab * hidden + tiny.num_hidden_layers * per_layer, vocab=vocab)


def model_copies(config: TrainConfig) -> int:
    """Copies of the policy's parameters a run holds: the weights, their gradients and AdamW's
    two moments, and the frozen reference when ``optim.kl_coef`` > 0 or the estimator reads it."""
    return 4 + (config.optim.kl_coef > 0 or "reference" in config.inputs)


def memory_estimate(config: TrainConfig, size: ModelSize | None = None) -> dict[str, float]:
    """Bytes the run would hold at once, by part: ``model`` (``model_copies`` of the policy's
    parameters in ``model.dtype``), ``logits`` (one scoring or SFT micro-batch's logits and
    their gradient, fp32), ``rollouts`` (an update's token ids, masks and log-probs).

    ``size`` is a checkpoint's, read from its ``config.json`` before its weights load; without
    it, the embedded model's (``embedded_size``), and for a checkpoint not yet read only the
    rollouts: a lower bound, checked again once the checkpoint is read."""
    rollout = config.rollout
    length = rollout.max_prompt_tokens + rollout.max_new_tokens
    estimate = {"model": 0.0, "logits": 0.0,
                "rollouts": rollout_bytes(config, rollout.tasks_per_update)}
    if size is None and config.model.name == "embedded":
        size = embedded_size(config)
    if size is not None:
        estimate["model"] = float(size.parameters) * DTYPE_BYTES[config.model.dtype] * \
            model_copies(config)
        micro = max(config.optim.score_micro_batch_size, config.optim.micro_batch_size,
                    config.sft.micro_batch_size)
        estimate["logits"] = float(micro) * length * size.vocab * 4 * 3
    return estimate


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
    """Refuse a run whose ``memory_estimate`` exceeds the memory that holds it, saying both.

    Args:
        size: a checkpoint's size (see ``memory_estimate``).
        memory: the bytes that hold the model and what they are (a GPU's, on ``cuda``);
            ``machine_memory()`` of "this machine" when None.
    """
    available, where = memory or (machine_memory(), "this machine")
    if available is None:
        return  # no way to know the machine's memory here: nothing to compare with
    estimate = memory_estimate(config, size)
    total = sum(estimate.values())
    if total <= available:
        return
    parts = ", ".join(f"{name} {value / GIB:,.1f}" for name, value in estimate.items())
    if size is None:
        fix = ("lower the sizes (model.tiny.hidden_size, model.tiny.max_vocab_size, "
               "rollout.group_size, rollout.tasks_per_update, rollout.max_steps, "
               "rollout.max_prompt_tokens, the micro-batch sizes)")
    else:
        fix = (f"the model's {size.parameters:,} parameters are held {model_copies(config)} "
               f"times in {config.model.dtype}; use a smaller model, model.dtype=bfloat16, "
               "optim.kl_coef=0 (no reference copy, if the estimator reads none) or smaller "
               "rollout and micro-batch sizes")
    raise ConfigError(f"this run needs about {total / GIB:,.1f} GiB of memory ({parts} GiB) "
                      f"and {where} has {available / GIB:,.1f} GiB; {fix}")
