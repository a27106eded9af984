"""Run configuration: YAML + dotted overrides, validated once, errors in one clear line."""

from __future__ import annotations

import os
import time

import pytest

from agentcredit.config import (
    ConfigError,
    RolloutConfig,
    TrainConfig,
    config_to_dict,
    estimator_config,
    load_config,
    save_config,
)
from agentcredit.config.bounded_yaml import MAX_DEPTH, YAML_LIMIT, YAML_NODES
from agentcredit.credit.gigpo import GiGPOConfig


def _error(*overrides: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(None, list(overrides))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_the_packaged_embedded_default_loads():
    config = load_config()
    assert isinstance(config, TrainConfig)
    assert config.model.name == "embedded" and config.sft.enabled
    assert config.env.alfworld.generator.max_receptacles == 5 and config.rollout.max_steps == 30
    assert (config.sft.demonstrations_per_task, config.sft.demonstration_noise) == (2, 0.2)
    # the embedded departures from the papers' setting (README, docs/settings.md)
    assert config.rollout.decoding == "admissible" and config.rollout.history_style == "compact"
    # held-out beside the pool: 4 games per task type and split, the pool played 8 times
    assert (config.env.valid_games_per_type, config.eval.pool_episodes_per_game) == (4, 8)
    # RL trains the policy that is evaluated, with a step that moves a tiny cloned policy
    # without collapsing it (the 1e-6 of real checkpoints does not move it)
    assert config.rollout.temperature == config.eval.temperature == 0.4
    assert config.optim.lr == 3e-4 and config.optim.mini_batches == 4


def test_dotted_overrides_are_parsed_as_yaml_values():
    config = load_config(None, ["rollout.group_size=4", "optim.lr=3e-4", "sft.enabled=false",
                                "env.alfworld.generator.max_receptacles=null",
                                "credit.estimator=gigpo", "credit.options.mode=mean_norm"])
    assert config.rollout.group_size == 4 and config.optim.lr == 3e-4
    assert config.sft.enabled is False and config.env.alfworld.generator.max_receptacles is None
    assert estimator_config(config.credit) == GiGPOConfig(mode="mean_norm")


def test_model_equals_dir_is_short_for_model_name(tmp_path):
    assert load_config(None, [f"model={tmp_path}"]).model.name == str(tmp_path)


def test_an_unknown_key_names_it_and_suggests_the_closest():
    assert _error("rollout.group_sise=4") == (
        "unknown config key 'rollout.group_sise'; did you mean 'rollout.group_size'?")
    assert "did you mean 'rollout.temperature'" in _error("rollot.temperature=1")
    assert "did you mean 'credit.options.gamma'" in _error("credit.estimator=gigpo",
                                                           "credit.options.gama=0.9")


def test_a_bad_value_names_the_field_the_value_and_the_allowed_range():
    assert _error("rollout.temperature=-1") == (
        "rollout.temperature = -1.0 is out of range; allowed [0.0, 10.0]")
    assert _error("rollout.action_format=xml") == (
        "rollout.action_format = 'xml' is not allowed; choose one of bare, tagged, raw")
    assert _error("run.updates=many") == "run.updates = 'many' must be an integer"
    assert "grpo" in _error("credit.estimator=grpp")
    assert _error("optim.kl_coef=true") == "optim.kl_coef = True must be a number"


def test_raw_responses_with_admissible_decoding_are_refused_with_the_fix():
    # the trie samples one suggested action verbatim: no room for raw's reasoning
    says = _error("rollout.action_format=raw", "rollout.decoding=admissible")
    assert says.startswith("rollout.decoding = 'admissible' samples exactly one suggested action")
    assert "set rollout.decoding=free" in says
    assert load_config(None, ["rollout.action_format=raw", "rollout.decoding=free"]
                       ).rollout.action_format == "raw"


def test_errors_from_nested_dataclasses_name_the_full_key():
    assert _error("env.alfworld.generator.max_receptacles=2") == (
        "env.alfworld.generator.max_receptacles = 2 is out of range; allowed [4, 1000]")
    assert _error("model.tiny.hidden_size=30") == (
        "model.tiny.num_attention_heads = 4 must divide hidden_size = 30 (head dim = "
        "hidden_size / heads)")
    assert _error("credit.estimator=vict", "credit.options.backbone=gigpo",
                  "credit.options.backbone.mode=mean") == (
        "credit.options.backbone.mode = 'mean' is not allowed; choose one of mean_std_norm, "
        "mean_norm; did you mean 'mean_norm'?")
    assert _error("credit.estimator=vict", "credit.options.backbone=ppo") == (
        "credit.options.backbone.name = 'ppo' is not allowed; choose one of grpo, rloo, gigpo, "
        "salt, hcapo, proxmo")


def test_a_malformed_override_or_file_is_one_line(tmp_path):
    assert "key=value" in _error("rollout.group_size")
    bad = tmp_path / "bad.yaml"
    bad.write_text("run: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.yaml")


def test_a_saved_config_loads_back_unchanged(tmp_path):
    config = load_config(None, ["credit.estimator=gigpo", "credit.options.gamma=0.9"])
    save_config(config, tmp_path / "config.yaml")
    assert config_to_dict(load_config(tmp_path / "config.yaml")) == config_to_dict(config)


def test_demonstration_noise_is_a_probability():
    assert "demonstration_noise" in _error("sft.demonstration_noise=1.5")


def test_the_trained_policy_is_tempered_as_the_rollouts_were_sampled():
    assert RolloutConfig(temperature=0.4).policy_temperature == 0.4
    # greedy rollouts record untempered log-probs, so they are scored at 1, not divided by 0
    assert RolloutConfig(temperature=0.0).policy_temperature == 1.0


def _file_error(path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_a_config_file_over_the_size_bound_is_refused_unparsed(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("run: {updates: 1}\n" + "#" * YAML_LIMIT)
    assert _file_error(big) == (
        f"config file {str(big)!r} is refused ({big} holds {YAML_LIMIT + 18:,} bytes, more than "
        f"the {YAML_LIMIT:,} this file may have); pass a YAML run config file")


def test_an_entity_expansion_config_file_is_refused_at_once(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join(f'*a{i - 1}' for _ in range(10))}]" for i in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    began = time.perf_counter()
    says = _file_error(bomb)
    assert time.perf_counter() - began < 5  # 10^9 values if expanded: refused long before
    assert says.startswith(f"{bomb} holds more than {YAML_NODES:,} values")


def test_an_entity_expansion_override_is_refused_at_once():
    bomb = "[" + ", ".join(["&a [x, x, x, x, x, x, x, x, x, x]",
                            *(f"&b{i} [{', '.join([f'*b{i - 1}' if i else '*a'] * 10)}]"
                              for i in range(8))]) + "]"
    began = time.perf_counter()
    says = _error(f"credit.options={bomb}")
    assert time.perf_counter() - began < 5
    assert says.startswith(f"override credit.options: its value holds more than {YAML_NODES:,}")


def test_a_config_file_nested_deeper_than_the_bound_is_refused(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("run: " + "[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH + "\n")
    assert _file_error(deep).startswith(f"{deep} nests deeper than {MAX_DEPTH}; a run config")


def test_a_config_file_that_is_a_fifo_is_refused_by_name_without_waiting(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # no writer: reading it would wait forever
    assert _file_error(fifo) == (f"config file {str(fifo)!r} is refused ({fifo} is a FIFO, not a "
                                 "regular file; replace it with the file itself); pass a YAML run "
                                 "config file")


def test_a_config_link_to_a_device_is_refused_by_name(tmp_path):
    link = tmp_path / "device.yaml"
    link.symlink_to(os.devnull)  # only read, never written
    assert f"({link} is a character device, not a regular file" in _file_error(link)


def test_a_config_link_the_user_names_is_followed_to_its_file(tmp_path):
    # the user chose the link (a shared config); a run folder's own config.yaml is never
    # read through one (cli: --resume)
    (tmp_path / "shared.yaml").write_text("rollout: {group_size: 4}\n")
    (tmp_path / "mine.yaml").symlink_to(tmp_path / "shared.yaml")
    assert load_config(tmp_path / "mine.yaml").rollout.group_size == 4
