"""Inputs checked before anything expensive runs: the device, the packaged presets; the RL
pool drawn from the train tasks and the evaluated splits."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from agentcredit.config import ConfigError, checks, load_config
from agentcredit.config.checks import memory_estimate
from agentcredit.run.model_folder import model_size
from agentcredit.train.build import (
    check_device,
    collector_config,
    draw_pool,
    episodes_per_split,
    load_model,
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


GIB = 1 << 30
#: rollouts of 24 rows of 120 tokens, micro-batches of 5
SMALL_RUN = ["rollout.group_size=2", "rollout.tasks_per_update=3", "rollout.max_steps=4",
             "rollout.max_prompt_tokens=100", "rollout.max_new_tokens=20",
             "optim.score_micro_batch_size=5", "optim.micro_batch_size=5",
             "sft.micro_batch_size=5"]


@pytest.fixture
def llama_folder(tmp_path):
    """A model folder of a 132,654,080-parameter Llama's config.json, and no weights at all."""
    from tests.run.test_model_folder import LLAMA

    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    return tmp_path


def test_a_checkpoint_over_the_memory_is_refused_before_its_weights_are_read(monkeypatch,
                                                                              llama_folder):
    config = load_config(None, SMALL_RUN)
    # 132,654,080 parameters held in float32 (4 bytes) as weights and gradients, and AdamW's two
    # moments (8 bytes): 530,616,320 + 530,616,320 + 1,061,232,640; optim.kl_coef = 0: no
    # reference; float32 compute: no autocast copy
    terms = memory_estimate(config, model_size(llama_folder)).terms
    assert (terms["weights"], terms["gradients"], terms["adam"]) == (
        530_616_320, 530_616_320, 1_061_232_640)
    assert terms["autocast"] == terms["reference"] == 0
    monkeypatch.setattr(checks, "machine_memory", lambda: 2 * GIB)
    with pytest.raises(ConfigError) as err:  # the folder has no weights: none was looked for
        load_model(config, llama_folder, training=True)
    message = str(err.value)
    assert message.startswith("this run needs about 2.5 GiB of memory in its generation phase "
                              "(weights 0.5, gradients 0.5, adam 1.0, ")
    assert message.endswith("and this machine has 2.0 GiB; the largest part is adam: use a "
                            "smaller model")
    monkeypatch.setattr(checks, "machine_memory", lambda: int(2.6 * GIB))  # it fits: go on
    with pytest.raises(ConfigError, match="it holds no .safetensors weights"):
        load_model(config, llama_folder, training=True)


def test_a_reference_copy_and_the_compute_dtype_change_what_a_checkpoint_needs(llama_folder):
    size = model_size(llama_folder)
    plain = memory_estimate(load_config(None, SMALL_RUN), size).terms
    half = memory_estimate(load_config(None, [*SMALL_RUN, "model.dtype=bfloat16"]), size).terms
    reference = load_config(None, [*SMALL_RUN, "optim.kl_coef=0.01"])
    # bfloat16 compute: the trained weights stay float32, autocast adds a 2-byte copy
    assert half["weights"] == plain["weights"] and half["adam"] == plain["adam"]
    assert half["autocast"] == 132_654_080 * 2
    # a reference is a frozen copy in model.dtype (float32 here)
    assert memory_estimate(reference, size).terms["reference"] == 132_654_080 * 4
    with pytest.raises(ConfigError, match=r"needs about 3.0 GiB .* or set optim.kl_coef=0 "
                                          r"\(no reference copy: 0.5 GiB less\)"):
        checks.check_memory(reference, size, (2 * GIB, "this machine"))


def test_a_model_loaded_for_evaluation_is_not_held_to_the_training_estimate(monkeypatch,
                                                                             llama_folder):
    config = load_config(None, SMALL_RUN)
    monkeypatch.setattr(checks, "machine_memory", lambda: 1)
    with pytest.raises(ConfigError, match="it holds no .safetensors weights"):
        load_model(config, llama_folder)


def test_on_cuda_a_checkpoint_is_held_to_the_gpu_memory(monkeypatch, llama_folder):
    config = load_config(None, [*SMALL_RUN, "run.device=cuda"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (0, 2 * GIB))
    monkeypatch.setattr(checks, "machine_memory", lambda: 1 << 50)
    with pytest.raises(ConfigError, match=r"needs about 2.5 GiB .* and the GPU cuda has 2.0 GiB"):
        load_model(config, llama_folder, training=True)
