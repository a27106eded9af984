"""A verl launch of an agentcredit run (docs/verl.md, "Launch"): verl's settings from the run's
agentcredit config, one command per backbone.

    python -m agentcredit.integrations.verl.launch ENV METHOD [--backbone NAME] [--config NAME]
        [--dry-run] [agentcredit overrides ...] [-- verl overrides ...]

``examples/verl/launch.sh`` is this command. ENV is a registered environment that declares a
step limit (``max_steps``: ``alfworld``, ``webshop``, or a plug-in's); METHOD is
``grpo``, ``gigpo``, ``vict`` (VICT over GiGPO), ``adrs`` (ADRS over GiGPO) or the name of any
other registered estimator, a plug-in's included (``credit.estimator=METHOD``). The
agentcredit config (``--config``, default ``hf``: docs/settings.md §6) with METHOD's settings
and the agentcredit overrides decides the environment, the rollouts, the credit and the
update; ``verl_overrides`` writes the verl keys that carry them (group size, tasks per
update, lengths, learning rate, clip, KL, micro-batches, mini-batches), the backbone's model
path, GPUs and rollout tensor parallel size, and the agentcredit plugin's keys. The verl
overrides after ``--`` come last and win.

Before verl starts, in the dry run and the real launch alike, ``preflight`` checks what verl
would otherwise fail on silently or late, one ``error:`` line each: that verl will load
agentcredit's plug-in (its ``verl.plugins`` entry point imports; external plug-ins are not
switched off by ``VERL_USE_EXTERNAL_PLUGINS``), that the trainer is agentcredit's
(``trainer.v1.trainer_mode``), and that the verl path prepares every input the estimator
declares (``supported.check_supported``).

``--dry-run`` composes verl's installed Hydra config from these overrides, runs the checks
verl's ``main_ppo`` runs before Ray starts (``validate_config``, the trainer-class lookup),
the rollout server count and the agentcredit trainer's own checks (``check_config``), prints
the resolved config as YAML on stdout (verl's own messages go to stderr) and exits; it needs
verl but no GPU. Without it the task files are written when missing (``write_task_files``)
and verl's ``main_ppo`` replaces this process.

Exit status, as the ``agentcredit`` CLI's: 2 with one ``error:`` line for a bad argument, a
plug-in that fails to load or a launch verl would refuse; 1 for a bug (its traceback); 130
when interrupted.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

# ConfigError alone: the config's sections load the plug-ins, which main() must catch
from agentcredit.config import ConfigError
from agentcredit.envs.suites import environment_specs
from agentcredit.error_text import NO_MESSAGE, first_line
from agentcredit.integrations.verl import ESTIMATOR_PREFIX, PLUGIN_NAME

if TYPE_CHECKING:
    from agentcredit.config import TrainConfig

#: METHOD -> its agentcredit overrides (docs/settings.md §6); an environment replaces them
#: through its ``verl_methods`` hook (WebShop's ADRS settings, ``envs/suites.py``). Any other
#: registered estimator's name is a METHOD too: ``credit.estimator=NAME``.
METHODS = {
    "grpo": ("credit.estimator=grpo",),
    "gigpo": ("credit.estimator=gigpo",),
    "vict": ("method=vict", "credit.options.backbone=gigpo"),
    "adrs": ("method=adrs", "credit.options.backbone=gigpo"),
}


@dataclass(frozen=True)
class Backbone:
    """A model and the GPUs one launch of it takes.

    Attributes:
        path: the Hugging Face checkpoint (``actor_rollout_ref.model.path``).
        gpus: GPUs on the one node (``trainer.n_gpus_per_node``).
        tensor_parallel: GPUs per rollout server (``rollout.tensor_model_parallel_size``); verl
            starts ``gpus // tensor_parallel`` servers, so it must not exceed ``gpus``.
    """

    path: str
    gpus: int
    tensor_parallel: int


BACKBONES = {
    "qwen2.5-0.5b": Backbone("Qwen/Qwen2.5-0.5B-Instruct", gpus=1, tensor_parallel=1),
    "qwen2.5-1.5b": Backbone("Qwen/Qwen2.5-1.5B-Instruct", gpus=2, tensor_parallel=1),
    "qwen2.5-7b": Backbone("Qwen/Qwen2.5-7B-Instruct", gpus=8, tensor_parallel=2),
}
DEFAULT_BACKBONE = "qwen2.5-1.5b"
DEFAULT_CONFIG = "hf"
USAGE = ("usage: launch.sh ENV METHOD [--backbone NAME] [--config NAME] [--dry-run] "
         "[agentcredit overrides ...] [-- verl overrides ...]")
HELP = f"""{USAGE}

Launch an agentcredit run on verl (docs/verl.md, "Launch").

  ENV             a registered environment that declares a step limit (max_steps):
                  alfworld, webshop or a plug-in's
  METHOD          grpo, gigpo, vict (VICT over GiGPO), adrs (ADRS over GiGPO), or any
                  registered estimator, a plug-in's included (credit.estimator=METHOD)
  --backbone      {', '.join(BACKBONES)} (default {DEFAULT_BACKBONE})
  --config        the agentcredit config (default {DEFAULT_CONFIG})
  --dry-run       print the resolved verl config and exit (needs verl, no GPU)
  key=value       agentcredit overrides; verl overrides go after --

Exit status: 0 done, 2 a bad argument or a launch verl would refuse (one error: line),
1 a bug, 130 interrupted."""


@dataclass(frozen=True)
class Launch:
    """One planned launch.

    Attributes:
        config: the run's agentcredit config, as the plugin will load it.
        agentcredit: the agentcredit overrides (``+agentcredit.overrides``).
        verl: verl's overrides, in order (the user's last).
        data_dir: where the train/val task files live.
        dry_run: print the resolved verl config instead of training.
    """

    config: TrainConfig
    agentcredit: tuple[str, ...]
    verl: tuple[str, ...]
    data_dir: Path
    dry_run: bool


def plan(argv: list[str]) -> Launch:
    """The launch ``argv`` asks for (module docs); ``ConfigError`` names a bad argument."""
    at = argv.index("--") if "--" in argv else len(argv)
    before, verl_extra = argv[:at], argv[at + 1:]
    flags = {"--backbone": DEFAULT_BACKBONE, "--config": DEFAULT_CONFIG}
    dry_run, positional = False, []
    args = iter(before)
    for arg in args:
        if arg == "--dry-run":
            dry_run = True
        elif arg in flags:
            flags[arg] = next(args, "")
        elif arg.startswith("--"):
            raise ConfigError(f"unknown option {arg}; {USAGE}")
        else:
            positional.append(arg)
    if len(positional) < 2 or "=" in positional[0] or "=" in positional[1]:
        raise ConfigError(USAGE)
    env, method, *overrides = positional
    launchable = {spec.name: spec for spec in environment_specs() if spec.max_steps is not None}
    if env not in launchable:
        raise ConfigError(f"ENV = {env!r} must be one of {', '.join(sorted(launchable))} (an "
                          "environment launches on verl once it registers max_steps)")
    spec = launchable[env]
    from agentcredit.config import load_config
    from agentcredit.credit import estimator_names

    estimators = [name for name in estimator_names() if name not in METHODS]
    if method not in METHODS and method not in estimators:
        raise ConfigError(f"METHOD = {method!r} must be one of {', '.join(METHODS)} or a "
                          f"registered estimator ({', '.join(estimators)})")
    backbone = BACKBONES.get(flags["--backbone"])
    if backbone is None:
        raise ConfigError(f"--backbone {flags['--backbone']!r} must be one of "
                          f"{', '.join(BACKBONES)}")
    settings = spec.verl_methods.get(method, METHODS.get(method, (f"credit.estimator={method}",)))
    agentcredit = (*settings, f"env={env}", f"rollout.max_steps={spec.max_steps}",
                   "rollout.decoding=free", f"model.name={backbone.path}", *overrides)
    config = load_config(flags["--config"], list(agentcredit))
    data_dir = Path("data") / "verl" / config.env.name
    verl = (*verl_overrides(config, flags["--config"], agentcredit, backbone, data_dir,
                            f"verl-{env}-{method}-{flags['--backbone']}"), *verl_extra)
    return Launch(config, agentcredit, verl, data_dir, dry_run)


def verl_overrides(config: TrainConfig, config_name: str, agentcredit: tuple[str, ...],
                   backbone: Backbone, data_dir: Path, name: str) -> list[str]:
    """verl's keys for ``config`` on ``backbone`` (docs/verl.md, "Launch").

    ``ppo_mini_batch_size`` is ``tasks_per_update / optim.mini_batches`` task groups, so the
    agentcredit trainer makes ``optim.mini_batches`` optimiser steps per update, each over an
    equal share of the update's step rows, as ``agentcredit train`` does. Raises
    ``ConfigError`` for settings verl's update cannot express.
    """
    from agentcredit.integrations.verl.supported import check_supported

    rollout, optim = config.rollout, config.optim
    if rollout.tasks_per_update % optim.mini_batches:
        raise ConfigError(f"optim.mini_batches = {optim.mini_batches} must divide "
                          f"rollout.tasks_per_update = {rollout.tasks_per_update} on the verl path "
                          "(verl counts a mini-batch in task groups)")
    check_supported(config)
    listed = ",".join(f'"{override}"' for override in agentcredit)
    actor, score = "actor_rollout_ref.actor", optim.score_micro_batch_size
    return [
        "trainer.use_v1=true", f"trainer.v1.trainer_mode={PLUGIN_NAME}",
        f"algorithm.adv_estimator={ESTIMATOR_PREFIX}{config.credit.estimator}",
        "algorithm.use_kl_in_reward=false",
        f"+agentcredit.config={config_name}", f"+agentcredit.overrides=[{listed}]",
        f"data.train_files={data_dir / 'train.parquet'}",
        f"data.val_files={data_dir / 'val.parquet'}",
        f"data.train_batch_size={rollout.tasks_per_update}",
        f"data.max_prompt_length={rollout.max_prompt_tokens}",
        f"data.max_response_length={rollout.max_new_tokens}",
        f"actor_rollout_ref.model.path={backbone.path}",
        "actor_rollout_ref.rollout.name=vllm",
        f"actor_rollout_ref.rollout.n={rollout.group_size}",
        f"actor_rollout_ref.rollout.temperature={rollout.temperature}",
        "actor_rollout_ref.rollout.calculate_log_probs=true",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={backbone.tensor_parallel}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={score}",
        f"actor_rollout_ref.rollout.agent.default_agent_loop={PLUGIN_NAME}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={score}",
        f"{actor}.ppo_mini_batch_size={rollout.tasks_per_update // optim.mini_batches}",
        f"{actor}.ppo_micro_batch_size_per_gpu={optim.micro_batch_size}",
        f"{actor}.ppo_epochs=1",
        f"{actor}.optim.lr={optim.lr}", f"{actor}.optim.weight_decay={optim.weight_decay}",
        f"{actor}.grad_clip={optim.grad_clip}",
        f"{actor}.clip_ratio_low={optim.clip_low}", f"{actor}.clip_ratio_high={optim.clip_high}",
        f"{actor}.use_kl_loss={str(optim.kl_coef > 0).lower()}",
        f"{actor}.kl_loss_coef={optim.kl_coef}", f"{actor}.kl_loss_type=low_var_kl",
        f"{actor}.entropy_coeff={optim.entropy_coef}", f"{actor}.loss_agg_mode=token-mean",
        f"trainer.n_gpus_per_node={backbone.gpus}", "trainer.nnodes=1",
        f"trainer.total_training_steps={config.run.updates}",
        f"trainer.test_freq={config.run.eval_every or -1}",
        f"trainer.save_freq={config.run.checkpoint_every}",
        f"trainer.default_local_dir=runs/{name}", "trainer.project_name=agentcredit",
        f"trainer.experiment_name={name}", "trainer.logger=[console]",
    ]


def compose(overrides: tuple[str, ...] | list[str]):
    """verl's ``ppo_trainer`` Hydra config with ``overrides``, as ``main_ppo`` builds it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from verl.trainer import main_ppo

    with initialize_config_dir(config_dir=str(Path(main_ppo.__file__).parent / "config"),
                               version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=list(overrides))


def check(config) -> None:
    """What verl's ``main_ppo`` checks before Ray starts, then the rollout servers and the
    agentcredit trainer's own checks; raises with verl's or the trainer's message."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.utils.config import validate_config

    from agentcredit.integrations.verl import plugin  # noqa: F401  (registers the trainer)

    validate_config(config=config, use_reference_policy=need_reference_policy(config),
                    use_critic=need_critic(config))
    trainer_cls = get_trainer_cls(config.trainer.v1.trainer_mode)
    rollout = config.actor_rollout_ref.rollout
    per_server = (rollout.tensor_model_parallel_size * rollout.data_parallel_size
                  * rollout.pipeline_model_parallel_size)
    gpus = config.trainer.n_gpus_per_node * config.trainer.nnodes
    if gpus // per_server < 1:  # verl's LLMServerManager starts gpus // per_server servers
        raise ValueError(f"{gpus} GPUs start no rollout server of {per_server} GPUs; set "
                         f"actor_rollout_ref.rollout.tensor_model_parallel_size<={gpus}")
    trainer_cls.check_config(config)


def write_task_files(config: TrainConfig, out: Path) -> None:
    """verl's train/val parquet files for ``config``: one row per task of the train split and
    of the first validation split, each naming its task (``ac_task``) and asking for the
    agentcredit agent loop; the prompt is a placeholder, the loop builds every step's prompt."""
    import pandas as pd  # verl's dependency, as is the parquet engine

    suite = config.env.build_suite()
    out.mkdir(parents=True, exist_ok=True)
    for split, name in (("train", "train"), (suite.validation_splits[0], "val")):
        rows = [{"data_source": f"agentcredit/{config.env.name}", "agent_name": PLUGIN_NAME,
                 "prompt": [{"role": "user", "content": task.instruction}],
                 "ac_task": {"split": split, "task_id": task.task_id}}
                for task in suite.tasks(split)]
        pd.DataFrame(rows).to_parquet(out / f"{name}.parquet")
        print(f"{name}: {len(rows)} tasks -> {out / f'{name}.parquet'}")


def main(argv: list[str] | None = None) -> int:
    """The command (module docs); bad input: one ``error:`` line, exit status 2. A launch
    that is not a dry run does not return: verl's ``main_ppo`` replaces the process."""
    argv = sys.argv[1:] if argv is None else argv
    if {"-h", "--help"} & set(argv[:argv.index("--") if "--" in argv else len(argv)]):
        print(HELP)
        return 0
    try:
        launch = plan(argv)
        preflight(launch)
        if launch.dry_run:
            return dry_run(launch)
        if not (launch.data_dir / "train.parquet").exists():
            write_task_files(launch.config, launch.data_dir)
    except ConfigError as err:  # a plug-in that fails to load (PluginError) is one too
        print(f"error: {first_line(err, NO_MESSAGE)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    os.execv(sys.executable, [sys.executable, "-m", "verl.trainer.main_ppo", *launch.verl])


def preflight(launch: Launch) -> None:
    """Raise ``ConfigError`` (one line with the fix) if verl would not load agentcredit's
    plug-in or not run agentcredit's trainer (module docstring); run before verl or Ray
    start. verl itself only logs a plug-in that fails to import (at DEBUG level) and then
    stops at "Unknown trainer 'agentcredit'" after Ray has started."""
    modes = [o.split("=", 1)[1] for o in launch.verl if o.startswith("trainer.v1.trainer_mode=")]
    if modes and modes[-1] != PLUGIN_NAME:
        raise ConfigError(f"trainer.v1.trainer_mode={modes[-1]} replaces agentcredit's trainer, "
                          "whose advantage step runs the estimator on the per-step rows; drop "
                          f"that override (the launch sets trainer.v1.trainer_mode={PLUGIN_NAME})")
    policy = os.environ.get("VERL_USE_EXTERNAL_PLUGINS", "auto").strip().lower()
    allowed = {name.strip() for name in policy.split(",") if name.strip()}
    if policy == "none" or (policy != "auto" and PLUGIN_NAME not in allowed):
        raise ConfigError(f"VERL_USE_EXTERNAL_PLUGINS={policy} keeps verl from loading "
                          f"agentcredit's plug-in; unset it or add {PLUGIN_NAME} to its list")
    points = [p for p in metadata.entry_points(group="verl.plugins") if p.name == PLUGIN_NAME]
    if not points:
        raise ConfigError("agentcredit's verl plug-in is not installed (no 'verl.plugins' entry "
                          f"point named {PLUGIN_NAME}); reinstall agentcredit: pip install -e "
                          "'.[verl]'")
    try:
        points[0].load()
    except Exception as err:
        raise ConfigError(f"verl would fail to load agentcredit's plug-in {points[0].value}: "
                          f"{type(err).__name__}: {_last_line(err)}; fix that import "
                          "(python -c 'import agentcredit.integrations.verl.plugin' shows "
                          "the traceback)") from err


def dry_run(launch: Launch) -> int:
    """Print the resolved verl config of ``launch`` once it passes ``check``: exit status 0,
    else one ``error:`` line with verl's or the trainer's message and 2."""
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        config = compose(launch.verl)
        with contextlib.redirect_stdout(sys.stderr):  # verl prints its checks; stdout is YAML
            check(config)
    except (HydraException, OmegaConfBaseException, ValueError, AssertionError) as err:
        print(f"error: {_last_line(err)}", file=sys.stderr)
        return 2
    print(OmegaConf.to_yaml(config, resolve=True), end="")
    return 0


def _last_line(err: BaseException) -> str:
    """The innermost cause's first line (verl wraps config errors in Hydra's)."""
    while err.__cause__ is not None:
        err = err.__cause__
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]


if __name__ == "__main__":
    sys.exit(main())
