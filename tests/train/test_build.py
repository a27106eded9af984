"""Inputs checked before anything expensive runs: the device, the packaged presets; the RL
pool drawn from the train tasks and the evaluated splits."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from agentcredit.config import ConfigError, load_config
from agentcredit.train.build import (
    check_device,
    collector_config,
    draw_pool,
    episodes_per_split,
    rl_tasks,
    validation_tasks,
)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_cuda_device_on_a_cpu_machine_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="run.device = 'cuda' but torch sees no CUDA device"):
        check_device(load_config(None, ["run.device=cuda"]))


def test_a_device_torch_does_not_know_is_refused():
    with pytest.raises(ConfigError, match="run.device = 'gpu' is not a torch device"):
        check_device(load_config(None, ["run.device=gpu"]))


def test_the_real_model_preset_uses_the_papers_settings_not_the_tiny_recipe():
    hf, embedded = load_config("hf"), load_config(None)
    assert hf.model.name != "embedded" and hf.model.dtype == "bfloat16"
    assert not hf.sft.enabled
    assert hf.optim.lr == 1e-6 and hf.optim.kl_coef == 0.01
    assert hf.rollout.action_format == "tagged"
    assert hf.rollout.max_new_tokens >= 256 > embedded.rollout.max_new_tokens
    # a GPU's memory is scarcer than its prefill time; a CPU rollout is mostly prefill
    assert not hf.rollout.reuse_prompt_cache and embedded.rollout.reuse_prompt_cache
    assert [collector_config(c).reuse_prompt_cache for c in (hf, embedded)] == [False, True]
    assert load_config("hf.yaml").model.name == hf.model.name


# THE RL POOL

def _train_tasks(make_fake_task, count=12):
    """``count`` fake train tasks; their types alternate type0, type1."""
    return [make_fake_task("train", i) for i in range(count)]


def test_a_pool_holds_its_size_of_each_task_type_in_train_order(make_fake_task):
    tasks = _train_tasks(make_fake_task)
    pool = draw_pool(tasks, 2, seed=0)
    assert len(pool) == 4
    assert sorted(t.task_type for t in pool) == ["type0", "type0", "type1", "type1"]
    positions = [tasks.index(t) for t in pool]
    assert positions == sorted(positions) and len(set(positions)) == 4


def test_a_pool_is_fixed_by_its_seed_and_other_seeds_draw_other_pools(make_fake_task):
    tasks = _train_tasks(make_fake_task)
    ids = {seed: [t.task_id for t in draw_pool(tasks, 2, seed)] for seed in range(6)}
    assert ids[0] == [t.task_id for t in draw_pool(list(tasks), 2, 0)]
    # 15 pools of two of the six tasks per type, squared: six seeds cannot all draw one
    assert len({tuple(pool) for pool in ids.values()}) > 1


def test_a_pool_does_not_depend_on_the_processs_hash_seed(make_fake_task):
    """Drawn in two processes with different PYTHONHASHSEED: the same task ids."""
    code = ("from agentcredit.envs.base import Task; "
            "from agentcredit.train.build import draw_pool; "
            "tasks = [Task(task_id=f'train-{i}', env='fake', split='train', instruction='', "
            "task_type=f'type{i % 2}', payload={}) for i in range(12)]; "
            "print([t.task_id for t in draw_pool(tasks, 2, 3)])")
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, env={**os.environ, "PYTHONHASHSEED": hash_seed}).stdout
               for hash_seed in ("1", "2")}
    tasks = _train_tasks(make_fake_task)
    assert outputs == {f"{[t.task_id for t in draw_pool(tasks, 2, 3)]}\n"}


def test_a_task_type_with_fewer_games_than_the_pool_size_brings_all_of_them(make_fake_task):
    tasks = _train_tasks(make_fake_task, count=5)  # type0: 3 tasks, type1: 2
    pool = draw_pool(tasks, 3, seed=0)
    assert [t.task_id for t in pool] == [t.task_id for t in tasks]


def test_rl_draws_from_the_pool_and_the_pool_is_evaluated_after_the_held_out_splits(
        fake_suite, make_fake_task):
    config = load_config(None, ["env=fake", "env.train_games_per_type=3",
                                "env.pool_games_per_type=1", "eval.pool_episodes_per_game=3",
                                "run.seed=5"])
    suite = config.env.build_suite()
    pool = rl_tasks(config, suite.tasks("train"))
    assert [t.task_id for t in pool] == [t.task_id for t in draw_pool(suite.tasks("train"), 1, 5)]
    valid = validation_tasks(config, suite)
    assert list(valid) == ["valid_seen", "valid_unseen", "pool"] and valid["pool"] == pool
    assert episodes_per_split(config, valid) == {"valid_seen": 1, "valid_unseen": 1, "pool": 3}
    no_pool = load_config(None, ["env=fake", "env.train_games_per_type=3",
                                 "env.pool_games_per_type=0"])
    assert rl_tasks(no_pool, suite.tasks("train")) == suite.tasks("train")
    assert list(validation_tasks(no_pool, suite)) == ["valid_seen", "valid_unseen"]


def test_the_pool_split_without_a_pool_is_refused_with_the_fix():
    with pytest.raises(ConfigError, match="set env.pool_games_per_type"):
        load_config(None, ["env.pool_games_per_type=0", "eval.splits=[pool]"])
