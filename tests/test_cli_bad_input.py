"""Bad input to the command line ends in one ``error:`` line with status 2, before any heavy
work: each case here once ended as an internal error (status 1) or a warning with status 0."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

import pytest
import torch
import yaml

from agentcredit.cli import main
from agentcredit.config import config_to_dict, load_config


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: ") and "internal error" not in err, err
    return err


@pytest.fixture(scope="module")
def model_without_vocabulary(tmp_path_factory) -> Path:
    """A tiny model folder whose tokenizer.json is gone (its tokenizer_config.json stays)."""
    from agentcredit.config import TinyModelConfig
    from agentcredit.train.warm_start.model_bootstrap import bootstrap_tiny_model

    folder = bootstrap_tiny_model(["go to countertop 1", "take egg 1 from countertop 2"] * 20,
                                  tmp_path_factory.mktemp("novocab"),
                                  TinyModelConfig(hidden_size=16, num_hidden_layers=1,
                                                  num_attention_heads=2, num_key_value_heads=1,
                                                  intermediate_size=32,
                                                  max_position_embeddings=64))
    (folder / "tokenizer.json").unlink()
    return folder


def test_a_binary_config_file(tmp_path, capsys):
    binary = tmp_path / "run.yaml"
    binary.write_bytes(bytes(range(256)))
    assert main(["train", "--config", str(binary)]) == 2
    assert _one_error_line(capsys) == (f"error: config file {str(binary)!r} is not UTF-8 text "
                                       "(byte 128); pass a YAML run config")


def test_a_seed_numpy_cannot_take(capsys):
    assert main(["train", "run.seed=4294967296"]) == 2
    assert _one_error_line(capsys) == ("error: run.seed = 4294967296 is out of range; allowed "
                                       "[0, 4294967295]")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_eval_on_a_device_this_machine_lacks(tmp_path, capsys):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")  # refused before it is read
    assert main(["eval", "--checkpoint", str(tmp_path / "model"), "run.device=cuda"]) == 2
    assert "torch sees no CUDA device on this machine; use run.device=cpu" in _one_error_line(
        capsys)


def test_audit_of_a_split_the_environment_lacks_before_any_game_is_made(capsys):
    began = time.perf_counter()
    assert main(["audit", "--split", "foo"]) == 2
    assert time.perf_counter() - began < 5
    assert _one_error_line(capsys) == ("error: --split 'foo': alfworld has the splits train, "
                                       "valid_seen, valid_unseen")


def _a_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"kind": "eval", "update": 0, "eval/success": 0.5}\n')
    return run


@pytest.mark.parametrize("viewer_mb", ["nan", "inf", "-1"])
def test_report_with_a_viewer_budget_that_is_not_a_size(tmp_path, viewer_mb, capsys):
    pytest.importorskip("plotly")
    assert main(["report", str(_a_run(tmp_path)), "--viewer-mb", viewer_mb,
                 "-o", str(tmp_path / "r.html")]) == 2
    assert _one_error_line(capsys).startswith(f"error: --viewer-mb {float(viewer_mb)}: must be "
                                              "a number, 0 or more")
    assert not (tmp_path / "r.html").exists()


def test_report_given_a_setting(tmp_path, capsys):
    assert main(["report", str(_a_run(tmp_path)), "rollout.group_size=2",
                 "-o", str(tmp_path / "r.html")]) == 2
    assert _one_error_line(capsys).startswith(
        "error: report takes no key=value settings (rollout.group_size=2)")


def test_a_model_folder_without_its_vocabulary(model_without_vocabulary, capsys):
    assert main(["eval", "--checkpoint", str(model_without_vocabulary)]) == 2
    assert "turns text into no tokens" in _one_error_line(capsys)


def _copy_with_tokenizer(fake_model_dir: Path, tmp_path: Path, edit) -> tuple[Path, int]:
    """A copy of the fake model folder whose tokenizer ``edit(tokenizer)`` changed, and the
    rows of the model's input embedding."""
    import shutil

    from transformers import AutoConfig, AutoTokenizer

    folder = Path(shutil.copytree(fake_model_dir, tmp_path / "model"))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    edit(tokenizer)
    tokenizer.save_pretrained(folder)
    return folder, AutoConfig.from_pretrained(folder).vocab_size


def test_a_tokenizer_with_neither_pad_nor_eos_is_one_line(fake_model_dir, tmp_path, capsys):
    def drop_pad_and_eos(tokenizer):
        tokenizer.pad_token = tokenizer.eos_token = None

    folder, _ = _copy_with_tokenizer(fake_model_dir, tmp_path, drop_pad_and_eos)
    assert main(["eval", "--checkpoint", str(folder)]) == 2
    assert _one_error_line(capsys) == (
        f"error: the tokenizer of {str(folder)!r} defines neither a pad nor an eos token; set "
        "tokenizer.pad_token in the checkpoint's tokenizer_config.json")


def test_a_chat_template_that_allocates_gigabytes_is_one_line(fake_model_dir, tmp_path, capsys):
    def bomb(tokenizer):
        tokenizer.chat_template = "{{ 'x' * 3000000000 }}"

    folder, _ = _copy_with_tokenizer(fake_model_dir, tmp_path, bomb)
    assert main(["eval", "--checkpoint", str(folder)]) == 2
    assert _one_error_line(capsys) == (
        f"error: the chat template of {str(folder)!r} needed more than 512 MiB to render a "
        "two-message chat (MemoryError); fix chat_template in its tokenizer_config.json (or "
        "chat_template.jinja)")


def test_a_tokenizer_longer_than_the_embedding_is_refused(fake_model_dir, tmp_path, capsys):
    rows = []

    def add_a_token_per_row(tokenizer):
        rows.append(len(tokenizer))
        tokenizer.add_tokens([f"<extra_{k}>" for k in range(600)])

    folder, embedding = _copy_with_tokenizer(fake_model_dir, tmp_path, add_a_token_per_row)
    assert rows[0] <= embedding < rows[0] + 600
    assert main(["eval", "--checkpoint", str(folder)]) == 2
    assert _one_error_line(capsys) == (
        f"error: the tokenizer of {str(folder)!r} has token ids up to {rows[0] + 599:,} but the "
        f"model's embedding has {embedding:,} rows (ids 0 to {embedding - 1:,}); use the "
        "tokenizer saved with these weights, or resize the embedding to the tokenizer "
        "(model.resize_token_embeddings(len(tokenizer))) and save both")


def test_a_token_whose_id_the_embedding_lacks_is_refused(fake_model_dir, tmp_path, capsys):
    """One token moved to id 10**6 leaves ``len(tokenizer)`` within the embedding; its id does
    not. (An added token's id past the others is renumbered on loading, so it is the length
    that grows, the case above.)"""
    folder, embedding = _copy_with_tokenizer(fake_model_dir, tmp_path, lambda tokenizer: None)
    spec = json.loads((folder / "tokenizer.json").read_text())
    vocab = spec["model"]["vocab"]
    vocab[max(vocab, key=vocab.get)] = 10**6
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    assert main(["eval", "--checkpoint", str(folder)]) == 2
    said = _one_error_line(capsys)
    assert f"has token ids up to 1,000,000 but the model's embedding has {embedding:,} rows" in said


def test_a_vocabulary_past_the_sane_bound_is_refused_before_the_weights(
        fake_model_dir, tmp_path, monkeypatch, capsys):
    """The bound (2**21) lowered below the fake tokenizer's size stands in for a tokenizer of
    millions of entries, which takes minutes to write and read here."""
    from agentcredit.train import model_loading

    def no_weights(*args, **kwargs):
        raise AssertionError("the weights were read")

    monkeypatch.setattr(model_loading, "MAX_VOCABULARY", 100)
    monkeypatch.setattr(model_loading.AutoModelForCausalLM, "from_pretrained", no_weights)
    assert main(["eval", "--checkpoint", str(fake_model_dir)]) == 2
    said = _one_error_line(capsys)
    assert said.startswith(f"error: the tokenizer of {str(fake_model_dir)!r} holds ")
    assert "tokens, more than the 100 any real vocabulary needs" in said


def test_a_garbage_line_inside_the_metrics_of_a_resumed_run(tmp_path, tiny_fake_run, capsys):
    run = tmp_path / "run"
    config = load_config(None, [*tiny_fake_run, f"run.output_dir={tmp_path}", "run.name=run"])
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump(config_to_dict(config)))
    (run / "metrics.jsonl").write_text('{"kind": "sft"}\nGARBAGE\n{"kind": "eval"}\n')
    (run / "reference").mkdir()  # a finished SFT start, as resume sees one
    (run / "reference" / "config.json").write_text("{}")
    (run / "reference" / "model.safetensors").write_bytes(b"")
    assert main(["train", "--resume", str(run)]) == 2
    assert _one_error_line(capsys) == (
        f"error: {run / 'metrics.jsonl'}:2 is not a JSON record (the line is not valid JSON: "
        "Expecting value at character 0); the file is "
        "damaged beyond a torn last line: delete or repair that line, or start the run again "
        "with --overwrite")


def test_a_disk_full_while_writing_the_report_names_the_file_and_leaves_nothing(
        tmp_path, capsys, monkeypatch):
    pytest.importorskip("plotly")
    run = _a_run(tmp_path)

    def no_space(fd, data):  # a report is never written to a device such as /dev/full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("os.write", no_space)
    assert main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 2
    assert _one_error_line(capsys).startswith(f"error: cannot write {tmp_path / 'r.html'}: the "
                                              "disk is full")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no temporary file left



def test_a_config_file_that_is_a_fifo_or_an_alias_bomb(tmp_path, capsys):
    os.mkfifo(tmp_path / "fifo.yaml")
    assert main(["train", "--config", str(tmp_path / "fifo.yaml")]) == 2
    assert "is a FIFO, not a regular file" in _one_error_line(capsys)
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"b{i}: &b{i} [{', '.join([f'*b{i - 1}' if i else '*a'] * 10)}]\n" for i in range(8)))
    began = time.perf_counter()
    assert main(["config", "--show", "--config", str(bomb)]) == 2
    assert time.perf_counter() - began < 5
    assert "holds more than 100,000 values" in _one_error_line(capsys)


@pytest.mark.parametrize(("setting", "says"), [
    ("model.tiny.num_hidden_layers=1000000000",
     "model.tiny.num_hidden_layers = 1000000000 is out of range; allowed [1, 256]"),
    ("model.tiny.num_hidden_layers=-1",
     "model.tiny.num_hidden_layers = -1 is out of range; allowed [1, 256]"),
    ("model.tiny.num_attention_heads=3",
     ("model.tiny.num_attention_heads = 3 must divide hidden_size = 128 "
      "(head dim = hidden_size / heads)")),
])
def test_an_embedded_model_size_the_architecture_rejects(setting, says, capsys):
    assert main(["train", setting]) == 2
    assert _one_error_line(capsys) == f"error: {says}"


def _folder_with_config(tmp_path: Path, **settings) -> Path:
    """A model folder of one weight whose config.json is a small Qwen2's with ``settings``."""
    from safetensors.torch import save_file

    folder = tmp_path / "model"
    folder.mkdir()
    config = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 16,
              "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
              "num_key_value_heads": 1, "vocab_size": 64, "layer_types": ["full_attention"]}
    (folder / "config.json").write_text(json.dumps({**config, **settings}))
    save_file({"model.embed_tokens.weight": torch.zeros(64, 16)}, folder / "model.safetensors")
    return folder


@pytest.mark.parametrize(("settings", "says"), [
    ({"num_hidden_layers": 10**9, "layer_types": None},
     ("its config.json num_hidden_layers = 1000000000 is no size transformers can build; allowed "
      "an integer in [1, 1,024]")),
    ({"num_hidden_layers": -1},
     ("its config.json num_hidden_layers = -1 is no size transformers can build; allowed an "
      "integer in [1, 1,024]")),
    ({"num_attention_heads": 3},
     ("its config.json num_attention_heads = 3 does not divide hidden_size = 16; set a head "
      "count that divides it (or head_dim)")),
    ({"num_hidden_layers": 2},  # the config class's own rule: one layer type per layer
     ("its config.json is refused by the 'qwen2' architecture: ValueError: `num_hidden_layers` "
      "(2) must be equal to the number of `layer_types` (1)")),
])
def test_a_model_folder_whose_config_the_architecture_rejects(tmp_path, settings, says, capsys):
    folder = _folder_with_config(tmp_path, **settings)
    began = time.perf_counter()
    assert main(["eval", "--checkpoint", str(folder)]) == 2
    assert time.perf_counter() - began < 30
    assert _one_error_line(capsys) == f"error: cannot load the model {str(folder)!r}: {says}"


def test_a_model_whose_config_the_memory_check_cannot_size_is_one_line(tmp_path, capsys):
    """A decoder the memory estimate cannot size (no MLP width in its config.json) is refused
    before any weight is read, naming what is missing."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 16, "n_layer": 1,
         "n_head": 2, "vocab_size": 64}))
    status = main(["train", "--config", "hf", "--model", str(folder), "run.device=cpu",
                   f"run.output_dir={tmp_path}", "run.name=unsized", "env=webshop",
                   "env.webshop.num_products=50", "env.webshop.valid_goals=2",
                   "env.webshop.test_goals=2"])
    assert status == 2
    said = _one_error_line(capsys)
    assert said.startswith(f"error: cannot load the model {str(folder)!r}: ")
    assert "intermediate" in said, said
    assert not (tmp_path / "unsized" / "reference").exists()
