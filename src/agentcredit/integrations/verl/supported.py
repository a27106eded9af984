"""What of an agentcredit config the verl path runs: ``check_supported`` refuses the rest, in
one line naming the setting and its fix.

The launch (``launch.verl_overrides``) and the trainer hook (``trainer.AgentCreditTrainer.
check_config``) both call it, so such a run stops before anything starts. DAPO's overlong
penalty is applied on the verl path (``rows.compute_row_credit``, ``credit/overlong.py``);
its dynamic sampling, which collects again inside one update, is not. Never imports verl.
"""

from __future__ import annotations

from agentcredit.config import ConfigError, TrainConfig

#: the inputs an estimator may declare that the verl path prepares (``credit.registry.INPUTS``):
#: the agent loop traces rollouts, the trainer hook adds the teacher pass and the reference's
#: log-probs; HCAPO's hindsight pass has no verl counterpart.
VERL_INPUTS = frozenset({"traces", "teacher", "reference"})


def check_supported(config: TrainConfig) -> None:
    """Raise ``ConfigError`` for a setting of ``config`` the verl path cannot run (module
    docstring)."""
    optim = config.optim
    missing = sorted(config.inputs - VERL_INPUTS)
    if missing:
        raise ConfigError(f"credit.estimator = {config.credit.estimator!r} needs "
                          f"{', '.join(missing)}, which the verl path does not prepare (it "
                          f"prepares {', '.join(sorted(VERL_INPUTS))}); choose another "
                          "estimator or use agentcredit train")
    if optim.loss_agg != "token_mean":
        raise ConfigError(f"optim.loss_agg = {optim.loss_agg!r} has no verl loss_agg_mode; set "
                          "optim.loss_agg=token_mean (verl's token-mean)")
    if optim.aux_loss != "none":
        raise ConfigError(f"optim.aux_loss = {optim.aux_loss!r} is not on the verl path; set "
                          "optim.aux_loss=none or use agentcredit train")
    if config.rollout.dynamic_sampling_rounds:
        raise ConfigError(f"rollout.dynamic_sampling_rounds = "
                          f"{config.rollout.dynamic_sampling_rounds} (DAPO's dynamic sampling) "
                          "is not on the verl path; set rollout.dynamic_sampling_rounds=0 or use "
                          "agentcredit train")
