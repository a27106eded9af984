"""The launch scripts pass verl's own checks on CPU (docs/verl.md, "Launch").

The overrides come from the scripts themselves: ``examples/verl/launch.sh`` and
``smoke_gpu.sh`` run under bash with a ``python`` on the PATH that records its arguments
(``launch.sh`` ends in ``python -m agentcredit.integrations.verl.launch "$@"``). Those
arguments are planned by that module and composed into verl's installed Hydra config
(``ppo_trainer``), as its ``--dry-run`` does, then put through what verl's ``main_ppo``
checks before Ray starts (``validate_config``, the trainer-class lookup), verl's own
rollout-server count (``LLMServerManager._initialize_llm_servers`` with a replica class that
starts nothing) and verl's ``PPOTrainer.__init__`` (which picks the replay buffer by trainer
mode). The dry run itself prints that config and nothing else on stdout. Needs verl; skipped
without it.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import importlib.util
import os
import re
import subprocess
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("verl") is None:
    pytest.skip("verl 0.9 is not importable: pip install agentcredit[verl]",
                allow_module_level=True)

from omegaconf import DictConfig, OmegaConf
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.trainer.ppo.v1 import get_trainer_cls
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.utils.config import validate_config
from verl.workers.rollout.llm_server import LLMServerManager

from agentcredit.integrations.verl import launch
from agentcredit.integrations.verl.trainer import AgentCreditTrainer

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "verl"
MODULE = ["-m", "agentcredit.integrations.verl.launch"]
#: (script, its arguments) for every env x method (the default backbone), the 7B backbone and
#: the GPU smoke test (the 0.5B backbone).
COMMANDS = {
    **{f"{env}-{method}": ("launch.sh", (env, method))
       for env in ("alfworld", "webshop") for method in ("grpo", "gigpo", "vict", "adrs")},
    "alfworld-vict-qwen2.5-7b": ("launch.sh", ("alfworld", "vict", "--backbone", "qwen2.5-7b")),
    "smoke_gpu": ("smoke_gpu.sh", ()),
}


def captured_arguments(script: str, args: tuple[str, ...], tmp_path: Path) -> list[str]:
    """What ``script args`` hands to ``python``, recorded by a ``python`` on the PATH."""
    shim = tmp_path / "bin"
    shim.mkdir()
    record = tmp_path / "argv"
    (shim / "python").write_text('#!/usr/bin/env bash\nprintf "%s\\0" "$@" > "$ARGV_RECORD"\n')
    (shim / "python").chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
           "ARGV_RECORD": str(record)}
    subprocess.run(["bash", str(EXAMPLES / script), *args], cwd=tmp_path, env=env,
                   capture_output=True, text=True, timeout=60, check=False)
    assert record.exists(), f"{script} never called python"
    argv = record.read_text().split("\0")[:-1]
    assert argv[:2] == MODULE, argv
    return argv[2:]


class NoServer:
    """verl's rollout replica interface, starting nothing: counts the replicas verl makes."""

    def __init__(self, replica_rank, config, model_config, gpus_per_node):
        self.replica_rank = replica_rank

    async def init_hybrid(self, worker_group):
        self._server_handle, self._server_address = None, f"replica-{self.replica_rank}"


def rollout_servers(config) -> int:
    """How many rollout servers verl's ``LLMServerManager`` starts on the run's GPUs."""
    manager_cls = type("CountingServerManager", (LLMServerManager,),
                       {"rollout_replica_class": NoServer})
    gpus = config.trainer.n_gpus_per_node * config.trainer.nnodes
    manager = manager_cls(config, worker_group=SimpleNamespace(world_size=gpus))
    asyncio.run(manager._initialize_llm_servers())
    return len(manager.rollout_replicas)


@functools.cache
def composed(command: str) -> tuple[launch.Launch, DictConfig]:
    """``command``'s planned launch and its verl config, composed and through ``launch.check``
    (what ``--dry-run`` does before it prints)."""
    script, args = COMMANDS[command]
    with tempfile.TemporaryDirectory() as tmp:
        planned = launch.plan(captured_arguments(script, args, Path(tmp)))
    config = launch.compose(planned.verl)
    launch.check(config)
    return planned, config


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_launch_passes_verls_checks_and_gets_a_rollout_server(command):
    planned, config = composed(command)
    validate_config(config, use_reference_policy=need_reference_policy(config),
                    use_critic=need_critic(config))
    assert get_trainer_cls(config.trainer.v1.trainer_mode) is AgentCreditTrainer
    assert rollout_servers(config) >= 1
    # verl's own __init__ picks the replay buffer by trainer mode: the synchronous one, which
    # fetches the whole batch of prompts at once
    trainer = AgentCreditTrainer(config)
    assert type(trainer.replay_buffer) is ReplayBuffer
    assert trainer.replay_buffer.gen_batch_size == config.data.train_batch_size
    assert trainer.trainer_mode == "sync"
    assert config.algorithm.adv_estimator == f"agentcredit.{planned.config.credit.estimator}"
    assert config.actor_rollout_ref.actor.ppo_mini_batch_size * \
        planned.config.optim.mini_batches == config.data.train_batch_size
    assert config.actor_rollout_ref.rollout.n == planned.config.rollout.group_size
    assert config.trainer.logger == ["console"]


def test_the_smoke_test_runs_the_small_backbone_on_one_gpu():
    _, config = composed("smoke_gpu")
    assert config.trainer.n_gpus_per_node == 1
    assert config.actor_rollout_ref.model.path == "Qwen/Qwen2.5-0.5B-Instruct"
    assert config.actor_rollout_ref.rollout.tensor_model_parallel_size == 1
    assert (config.data.train_batch_size, config.actor_rollout_ref.rollout.n) == (4, 4)
    assert config.trainer.total_training_steps == 3
    assert config.actor_rollout_ref.rollout.gpu_memory_utilization == 0.4


def test_the_seven_b_backbone_shares_eight_gpus_among_two_gpu_rollout_servers():
    _, config = composed("alfworld-vict-qwen2.5-7b")
    assert config.trainer.n_gpus_per_node == 8
    assert config.actor_rollout_ref.rollout.tensor_model_parallel_size == 2
    assert rollout_servers(config) == 4


def test_the_dry_run_prints_only_a_config_that_verl_accepts(tmp_path, capsys):
    argv = captured_arguments("launch.sh", ("alfworld", "vict", "--dry-run"), tmp_path)
    assert launch.main(argv) == 0
    printed = OmegaConf.create(capsys.readouterr().out)
    validate_config(printed, use_reference_policy=need_reference_policy(printed),
                    use_critic=need_critic(printed))
    assert printed == OmegaConf.create(OmegaConf.to_yaml(composed("alfworld-vict")[1],
                                                         resolve=True))


def test_a_launch_without_rollout_servers_is_refused_though_verl_accepts_it():
    config = copy.deepcopy(composed("smoke_gpu")[1])
    config.actor_rollout_ref.rollout.tensor_model_parallel_size = 2  # verl's default
    validate_config(config, use_reference_policy=need_reference_policy(config),
                    use_critic=need_critic(config))
    assert rollout_servers(config) == 0
    with pytest.raises(ValueError, match="tensor_model_parallel_size<=1"):
        launch.check(config)


@pytest.mark.parametrize(("argv", "named"), [
    (["alfworld", "ppo"], "METHOD"), (["minecraft", "vict"], "ENV"),
    (["alfworld", "vict", "--backbone", "qwen3"], "--backbone"),
    (["alfworld", "vict", "optim.mini_batches=3"], "optim.mini_batches"),
    (["alfworld", "grpo", "method=dapo"], "rollout.dynamic_sampling_rounds"),
    (["alfworld", "grpo", "optim.loss_agg=rollout_mean"], "optim.loss_agg"),
])
def test_a_bad_launch_argument_is_one_error_line_naming_it(argv, named, capsys):
    assert launch.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and named in err


@pytest.mark.parametrize(("key", "value", "named"), [
    ("actor_rollout_ref.actor.ppo_mini_batch_size", 16, "ppo_mini_batch_size=4"),
    ("actor_rollout_ref.actor.ppo_epochs", 2, "ppo_epochs=1"),
    ("actor_rollout_ref.actor.shuffle", True, "shuffle=false"),
    ("algorithm.adv_estimator", "agentcredit.gigpo", "algorithm.adv_estimator=agentcredit.vict"),
])
def test_the_trainer_refuses_a_verl_config_that_disagrees_with_its_agentcredit_config(
        key, value, named):
    config = copy.deepcopy(composed("alfworld-vict")[1])
    OmegaConf.update(config, key, value)
    with pytest.raises(ValueError, match=re.escape(named)):
        AgentCreditTrainer.check_config(config)


def test_the_trainer_refuses_dynamic_sampling_before_anything_starts():
    config = copy.deepcopy(composed("alfworld-grpo")[1])
    OmegaConf.update(config, "agentcredit.overrides",
                     [*config.agentcredit.overrides, "rollout.dynamic_sampling_rounds=3"])
    with pytest.raises(ValueError, match=re.escape("rollout.dynamic_sampling_rounds=0")):
        AgentCreditTrainer.check_config(config)


def test_the_overlong_penalty_alone_launches_on_verl():
    launched = launch.plan(["alfworld", "grpo", "rollout.overlong_buffer=0.2"])
    assert launched.config.rollout.overlong_buffer == 0.2


@pytest.fixture(params=["dry run", "real launch"])
def launched(request, monkeypatch):
    """``launched(argv)``: the launch's exit status, as a dry run or a real launch (whose
    hand-over to verl fails the test if reached)."""
    def execv(*args):
        raise AssertionError(f"the launch handed over to verl: {args[1][:3]}")

    monkeypatch.setattr(launch.os, "execv", execv)
    monkeypatch.setattr(launch, "write_task_files", lambda config, out: None)
    dry = ["--dry-run"] if request.param == "dry run" else []
    return lambda argv: launch.main([*argv[:2], *dry, *argv[2:]])


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


def test_a_plugin_that_verl_would_fail_to_import_is_one_error_line(launched, monkeypatch,
                                                                   capsys):
    broken = launch.metadata.EntryPoint(name="agentcredit", value="agentcredit_missing_plugin",
                                        group="verl.plugins")
    monkeypatch.setattr(launch.metadata, "entry_points", lambda group: [broken])
    assert launched(["alfworld", "grpo"]) == 2
    err = one_error_line(capsys)
    assert "verl would fail to load agentcredit's plug-in agentcredit_missing_plugin" in err
    assert "ModuleNotFoundError" in err


def test_switching_off_verls_external_plugins_is_one_error_line(launched, monkeypatch, capsys):
    monkeypatch.setenv("VERL_USE_EXTERNAL_PLUGINS", "none")
    assert launched(["alfworld", "grpo"]) == 2
    assert "VERL_USE_EXTERNAL_PLUGINS=none keeps verl from loading" in one_error_line(capsys)


def test_an_estimator_whose_inputs_verl_cannot_prepare_is_refused_at_launch(launched, capsys):
    assert launched(["alfworld", "grpo", "credit.estimator=hcapo"]) == 2
    err = one_error_line(capsys)
    assert "'hcapo' needs hindsight, which the verl path does not prepare" in err


def test_replacing_the_trainer_mode_is_one_error_line(launched, capsys):
    assert launched(["alfworld", "grpo", "--", "trainer.v1.trainer_mode=sync"]) == 2
    assert "trainer.v1.trainer_mode=sync replaces agentcredit's trainer" in \
        one_error_line(capsys)
