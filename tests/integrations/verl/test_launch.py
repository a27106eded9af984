"""The launch scripts pass verl's own checks on CPU (docs/verl.md, "Launch").

The overrides come from the scripts themselves: ``examples/verl/launch.sh`` and
``smoke_gpu.sh`` run under bash with a ``python`` on the PATH that records its arguments
(``launch.sh`` ends in ``python -m agentcredit.integrations.verl.launch "$@"``); the recorded
arguments are planned by that module, composed into verl's installed Hydra config
(``ppo_trainer``), and put through what verl's ``main_ppo`` checks before Ray starts
(``validate_config``, the trainer-class lookup), verl's own rollout-server count
(``LLMServerManager._initialize_llm_servers`` with a replica class that starts nothing) and
verl's ``PPOTrainer.__init__`` (which picks the replay buffer by trainer mode). Needs verl;
skipped without it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("verl") is None:
    pytest.skip("verl 0.9 is not importable: pip install agentcredit[verl]",
                allow_module_level=True)

from omegaconf import OmegaConf
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.utils.config import validate_config
from verl.workers.rollout.llm_server import LLMServerManager

from agentcredit.integrations.verl import launch
from agentcredit.integrations.verl.trainer import AgentCreditTrainer

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "verl"
MODULE = ["-m", "agentcredit.integrations.verl.launch"]
#: (script, its arguments) for every env x method, every backbone and the GPU smoke test.
COMMANDS = {
    **{f"{env}-{method}": ("launch.sh", (env, method))
       for env in ("alfworld", "webshop") for method in ("grpo", "gigpo", "vict", "adrs")},
    **{f"alfworld-vict-{backbone}": ("launch.sh", ("alfworld", "vict", "--backbone", backbone))
       for backbone in ("qwen2.5-0.5b", "qwen2.5-7b")},
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


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_launch_passes_verls_checks_and_gets_a_rollout_server(command, tmp_path):
    script, args = COMMANDS[command]
    planned = launch.plan(captured_arguments(script, args, tmp_path))
    config = launch.compose(planned.verl)
    launch.check(config)  # raises on any failure
    validate_config(config, use_reference_policy=need_reference_policy(config),
                    use_critic=need_critic(config))
    assert rollout_servers(config) >= 1
    # verl's own __init__ picks the replay buffer by trainer mode: the synchronous one, which
    # fetches the whole batch of prompts at once
    trainer = AgentCreditTrainer(config)
    assert type(trainer.replay_buffer) is ReplayBuffer
    assert trainer.replay_buffer.gen_batch_size == config.data.train_batch_size
    assert trainer.trainer_mode == "sync"
    estimator = planned.config.credit.estimator
    assert config.algorithm.adv_estimator == f"agentcredit.{estimator}"
    actor = config.actor_rollout_ref.actor
    assert actor.ppo_mini_batch_size * planned.config.optim.mini_batches == \
        config.data.train_batch_size
    assert config.actor_rollout_ref.rollout.n == planned.config.rollout.group_size


def test_the_smoke_test_runs_the_small_backbone_on_one_gpu(tmp_path):
    planned = launch.plan(captured_arguments("smoke_gpu.sh", (), tmp_path))
    config = launch.compose(planned.verl)
    assert config.trainer.n_gpus_per_node == 1
    assert config.actor_rollout_ref.model.path == "Qwen/Qwen2.5-0.5B-Instruct"
    assert config.actor_rollout_ref.rollout.tensor_model_parallel_size == 1
    assert (config.data.train_batch_size, config.actor_rollout_ref.rollout.n) == (4, 4)
    assert config.trainer.total_training_steps == 3
    assert config.actor_rollout_ref.rollout.gpu_memory_utilization == 0.4


def test_the_dry_run_prints_a_config_that_verl_accepts(tmp_path, capsys):
    argv = captured_arguments("launch.sh", ("alfworld", "vict", "--dry-run"), tmp_path)
    assert launch.main(argv) == 0
    printed = OmegaConf.create(capsys.readouterr().out)
    validate_config(printed, use_reference_policy=need_reference_policy(printed),
                    use_critic=need_critic(printed))
    assert printed.trainer.v1.trainer_mode == "agentcredit"
    assert printed.algorithm.adv_estimator == "agentcredit.vict"
    assert printed.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 4
    assert printed.trainer.logger == ["console"]


def test_a_launch_without_rollout_servers_is_one_error_line(capsys):
    argv = ["alfworld", "vict", "--dry-run", "--backbone", "qwen2.5-0.5b", "--",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=2"]
    assert launch.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    assert "tensor_model_parallel_size" in err


@pytest.mark.parametrize(("argv", "named"), [
    (["alfworld", "ppo"], "METHOD"), (["minecraft", "vict"], "ENV"),
    (["alfworld", "vict", "--backbone", "qwen3"], "--backbone"),
    (["alfworld", "vict", "optim.mini_batches=3"], "optim.mini_batches"),
])
def test_a_bad_launch_argument_is_one_error_line_naming_it(argv, named, capsys):
    assert launch.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and named in err
