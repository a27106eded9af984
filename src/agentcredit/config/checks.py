"""The checks that cross sections, run once after a config is built (``check_config``).

Each section checks its own fields at construction; these check what one section
cannot see alone: the estimator and the auxiliary loss are registered and the options build,
the environment is registered and ``eval.splits`` are its splits, the rollouts record what
the estimator's inputs are built from, and the skill settings fit the teacher.
"""

from __future__ import annotations

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
