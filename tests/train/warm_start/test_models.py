"""load_policy: local checkpoints load, local-looking bad paths fail clearly without a download."""

from __future__ import annotations

import shutil

import pytest
from transformers import AutoTokenizer

from agentcredit.train.warm_start.models import ModelLoadError, _looks_local, load_policy


def test_load_policy_on_a_missing_dir_names_the_path(tmp_path):
    missing = tmp_path / "no_such_checkpoint"
    with pytest.raises(FileNotFoundError, match="no_such_checkpoint") as err:
        load_policy(str(missing))
    assert "config.json" in str(err.value)
    assert "bootstrap_tiny_model" in str(err.value)


@pytest.mark.parametrize("path", ["./runs/missing_model", "../missing_model", "~/missing/model/x"])
def test_load_policy_never_treats_a_relative_looking_path_as_a_hub_id(path):
    with pytest.raises(FileNotFoundError, match="missing"):
        load_policy(path)


def test_load_policy_on_a_dir_without_config_says_what_to_pass(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json") as err:
        load_policy(str(tmp_path))
    assert str(tmp_path) in str(err.value)


def test_load_policy_sets_pad_to_eos_when_the_tokenizer_has_none(tmp_path, tiny_model_dir):
    checkpoint = tmp_path / "no_pad"
    shutil.copytree(tiny_model_dir, checkpoint)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    tokenizer.pad_token = None
    tokenizer.save_pretrained(checkpoint)
    _, loaded = load_policy(str(checkpoint))
    assert loaded.pad_token == loaded.eos_token == "<|im_end|>"


@pytest.mark.parametrize(
    ("name", "local"),
    [
        ("Qwen/Qwen2.5-1.5B-Instruct", False),
        ("gpt2", False),
        ("/abs/path", True),
        ("./rel", True),
        ("a/b/c", True),
        ("dir/", True),
    ],
)
def test_only_owner_slash_name_strings_are_taken_as_hub_ids(name, local):
    assert _looks_local(name) is local


def test_an_owner_slash_name_whose_owner_is_a_local_folder_is_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert _looks_local("runs/tiny") is True
    with pytest.raises(FileNotFoundError, match="'runs/tiny' does not exist"):
        load_policy("runs/tiny")  # at once: no hub retries


def _damaged_copy(tmp_path, tiny_model_dir, name: str):
    checkpoint = tmp_path / name
    shutil.copytree(tiny_model_dir, checkpoint)
    return checkpoint


def test_truncated_weights_are_one_line_naming_the_model(tmp_path, tiny_model_dir):
    checkpoint = _damaged_copy(tmp_path, tiny_model_dir, "torn")
    weights = checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])
    with pytest.raises(ModelLoadError, match="cannot load the model") as err:
        load_policy(str(checkpoint))
    assert "\n" not in str(err.value) and "torn" in str(err.value)


def test_a_broken_config_json_is_one_line(tmp_path, tiny_model_dir):
    checkpoint = _damaged_copy(tmp_path, tiny_model_dir, "broken")
    (checkpoint / "config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="cannot load the model") as err:
        load_policy(str(checkpoint))
    assert "\n" not in str(err.value)


def test_a_tokenizer_without_a_chat_template_is_refused(tmp_path, tiny_model_dir):
    checkpoint = _damaged_copy(tmp_path, tiny_model_dir, "plain")
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    tokenizer.chat_template = None
    tokenizer.save_pretrained(checkpoint)
    for extra in checkpoint.glob("chat_template.*"):
        extra.unlink()
    with pytest.raises(ModelLoadError, match="has no chat template"):
        load_policy(str(checkpoint))
