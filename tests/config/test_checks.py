"""Config values that would reach deep code unchecked are refused at load, in one line naming
the key, the value and the fix (config/checks.py, ``_check_values``)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from agentcredit.config import ConfigError, load_config
from agentcredit.config.checks import memory_estimate


@pytest.mark.parametrize(("overrides", "message"), [
    (["env=tau-retail", "env.tau.user=llm"],
     "env.tau.user = 'llm' .* env.tau.user_endpoint.base_url is empty"),
    # each within its own range (tests/config/test_schema.py), over what the machine or the
    # other keys allow
    (["run.threads=4000"], "run.threads = 4000 is over"),
    (["optim.mini_batches=50000"], "optim.mini_batches = 50000 is more than the 960 "),
    (["rollout.group_size=1024", "rollout.tasks_per_update=10000"],
     "needs about [0-9,.]+ GiB of memory .*rollouts"),
    (["model.tiny.hidden_size=16384", "model.tiny.num_hidden_layers=256"],
     "needs about [0-9,.]+ GiB of memory .*this machine has"),
])
def test_an_absurd_or_malformed_value_is_refused_at_load_in_one_line(overrides, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_config(None, overrides)
    assert "\n" not in str(err.value)


def test_the_memory_estimate_is_the_hand_worked_sum():
    config = load_config(None, ["model.tiny.hidden_size=64", "model.tiny.num_hidden_layers=2",
                                "model.tiny.intermediate_size=128",
                                "model.tiny.max_vocab_size=1000", "rollout.group_size=2",
                                "rollout.tasks_per_update=3", "rollout.max_steps=4",
                                "rollout.max_prompt_tokens=100", "rollout.max_new_tokens=20",
                                "optim.score_micro_batch_size=5", "optim.micro_batch_size=5",
                                "sft.micro_batch_size=5"])
    # parameters (4 heads, 2 kv heads of 16): embedding 1000*64 = 64,000; per layer q 4,160,
    # k and v 4,160, o 4,096, MLP 3*64*128 = 24,576, norms 128: 37,120; final norm 64: 138,304
    # held, float32, no reference (optim.kl_coef = 0): weights and gradients 4 bytes each,
    # AdamW 8; rollouts 24 rows * 120 tokens * 32 bytes
    assert config.optim.kl_coef == 0 and config.rollout.reuse_prompt_cache
    estimate = memory_estimate(config)
    assert estimate.held == {"weights": 553_216.0, "gradients": 553_216.0, "adam": 1_106_432.0,
                             "autocast": 0.0, "reference": 0.0, "rollouts": 92_160.0}
    # a = 2*4*64 + 2*4*64 + 2*4*64 + 5*4*64 + 4*4*128 = 4,864 bytes per token and layer;
    # keys and values: 2 layers * 2 * 2 kv heads * 16 * 4 = 512 bytes per token
    assert estimate.phases == {
        "generation": {"kv_cache": 64 * (100 + 120) * 512.0, "prefill": 8 * 100 * 4_864.0,
                       "prompt_cache": 6 * 100 * 512.0},
        "scoring": {"kv_cache": 5 * 120 * 512.0, "layer": 5 * 120 * 4_864.0,
                    "logits": 5 * 20 * 1000 * 4 * 2.0},
        "ppo": {"activations": 5 * 120 * 2 * 4_864.0, "logits": 5 * 20 * 1000 * 4 * 4.0},
        "sft": {"activations": 5 * 120 * 2 * 4_864.0, "logits": 5 * 20 * 1000 * 4 * 4.0}}
    # generation 11,407,360 is the largest phase; held 2,305,024
    assert estimate.peak_phase == "generation"
    assert estimate.total == 2_305_024 + 11_407_360
    with_reference = dataclasses.replace(config, optim=dataclasses.replace(config.optim,
                                                                           kl_coef=0.01))
    assert memory_estimate(with_reference).held["reference"] == 138_304 * 4.0


def test_the_default_config_fits_this_machine():
    assert memory_estimate(load_config(None, [])).total < (
        os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
