"""The ``env`` section: ``env=NAME`` selects the environment, each environment's options live
under its own key, and the keys of the earlier flat layout are refused with their new name."""

from __future__ import annotations

import pytest
import yaml

from agentcredit.cli import main
from agentcredit.config import ConfigError, config_to_dict, load_config, save_config
from agentcredit.envs.alfworld.options import AlfWorldConfig
from agentcredit.envs.tau.options import TauConfig
from agentcredit.envs.webshop.options import WebShopConfig


def _error(*overrides: str, path=None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, list(overrides))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_env_equals_name_selects_the_environment_whose_options_the_suite_gets():
    alfworld = load_config(None, ["env.alfworld.generator.max_receptacles=6"]).env
    assert alfworld.name == "alfworld" and isinstance(alfworld.options, AlfWorldConfig)
    assert alfworld.options.generator.max_receptacles == 6
    webshop = load_config(None, ["env=webshop", "env.webshop.num_products=50"]).env
    assert isinstance(webshop.options, WebShopConfig) and webshop.options.num_products == 50


def test_both_tau_domains_read_the_options_under_env_tau():
    for name in ("tau-retail", "tau-airline"):
        env = load_config(None, [f"env={name}", "env.tau.max_tasks=3"]).env
        assert isinstance(env.options, TauConfig) and env.options.max_tasks == 3


def test_switching_environment_keeps_the_game_counts_of_the_preset():
    env = load_config(None, ["env=webshop"]).env  # the embedded preset sets 40 and 4
    assert (env.train_games_per_type, env.valid_games_per_type) == (40, 4)


def test_an_environment_without_options_section_gets_none(fake_suite):
    env = load_config(None, ["env=fake"]).env
    assert env.options is None
    assert len(env.build_suite().tasks("train")) == 2 * env.train_games_per_type


@pytest.mark.parametrize(("override", "message"), [
    ("env.generator.max_receptacles=6",
     "env.generator.max_receptacles moved: use env.alfworld.generator.max_receptacles"),
    ("env.cache_dir=/tmp/games", "env.cache_dir moved: use env.alfworld.cache_dir"),
])
def test_a_key_of_the_flat_layout_is_refused_naming_its_new_key(override, message):
    assert _error(override) == message


def test_a_yaml_file_with_a_moved_key_is_refused_naming_its_new_key(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text("env:\n  name: alfworld\n  generator:\n    seed: 3\n")
    assert _error(path=path) == "env.generator.seed moved: use env.alfworld.generator.seed"


def test_the_command_line_refuses_a_moved_key_in_one_line(capsys):
    assert main(["config", "--show", "env.generator.seed=1"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: env.generator.seed moved: use env.alfworld.generator.seed")


def test_config_show_prints_the_selected_environments_options_under_its_key(capsys):
    assert main(["config", "--show", "env.alfworld.generator.seed=7"]) == 0
    out = capsys.readouterr().out
    assert "  alfworld:\n    generator:\n      seed: 7\n" in out
    env = yaml.safe_load(out)["env"]
    assert env["alfworld"]["generator"]["seed"] == 7
    assert not {"generator", "cache_dir", "webshop", "tau"} & set(env)


def test_a_resolved_config_holds_the_selected_environments_options_only():
    data = config_to_dict(load_config(None, ["env=tau-airline", "env.tau.max_tasks=2"]))
    assert data["env"]["name"] == "tau-airline" and data["env"]["tau"]["max_tasks"] == 2
    assert not {"alfworld", "webshop", "searchqa"} & set(data["env"])
    assert set(data["env"]) >= {"train_games_per_type", "valid_games_per_type",
                                "pool_games_per_type"}


def test_a_saved_config_of_another_environment_loads_back_unchanged(tmp_path):
    config = load_config(None, ["env=webshop", "env.webshop.num_products=50"])
    save_config(config, tmp_path / "config.yaml")
    again = load_config(tmp_path / "config.yaml")
    assert config_to_dict(again) == config_to_dict(config)
    assert again.env.options == config.env.options
