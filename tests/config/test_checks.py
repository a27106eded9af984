"""Config values that would reach deep code unchecked are refused at load, in one line naming
the key, the value and the fix (config/checks.py, ``_check_values``)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from agentcredit.config import ConfigError, load_config
from agentcredit.config.checks import memory_estimate, url_problem


@pytest.mark.parametrize(("overrides", "message"), [
    (["run.name=a\x00b"], r"run.name = 'a\\x00b' holds a NUL character"),
    (["run.output_dir=/tmp/x\x00y"], "run.output_dir = .* holds a NUL character"),
    (["env=tau-retail", "env.tau.user=llm"],
     "env.tau.user = 'llm' .* env.tau.user_endpoint.base_url is empty"),
    (["env=tau-retail", "env.tau.judge_endpoint.base_url=http://host:99999/v1"],
     "env.tau.judge_endpoint.base_url = .* is not a usable URL"),
    (["env=tau-retail", "env.tau.judge_endpoint.base_url=localhost:8000"],
     "not a usable URL .*not http or https"),
    (["run.threads=100000"], "run.threads = 100000 is over"),
    (["sft.epochs=1000000"], "sft.epochs = 1e\\+06 is over 100"),
    (["env.train_games_per_type=10000000"], "env.train_games_per_type = 10000000 is over"),
    (["optim.mini_batches=100000000"], "optim.mini_batches = 100000000 is more than the"),
    (["rollout.group_size=100000000"], "needs about [0-9,.]+ GiB of memory .*rollouts"),
    (["model.tiny.hidden_size=16384", "model.tiny.num_hidden_layers=256"],  # within the limits
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


@pytest.mark.parametrize(("url", "problem"), [
    ("http://localhost:8000/v1", ""),
    ("https://api.example.com/v1", ""),
    ("ftp://host/v1", "the scheme is 'ftp', not http or https"),
    ("http:///v1", "no host"),
    ("http://host:port/v1", "Port could not be cast to integer value as 'port'"),
    ("http://ho st/v1", "it holds a space or a control character"),
    ("http://[::1/v1", "Invalid IPv6 URL"),
])
def test_a_url_is_parsed_at_load(url, problem):
    assert url_problem(url) == problem
