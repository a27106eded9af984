"""A model folder's size is read from its config.json before any weight, and the files
transformers reads as text are bounded before it reads them (run/model_folder.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentcredit.config.checks import ModelSize
from agentcredit.run.model_folder import model_size, settings_problem, text_files_problem

#: a Llama of 132,654,080 parameters, described and never allocated
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 1024,
         "intermediate_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 8,
         "num_key_value_heads": 8, "vocab_size": 32000, "tie_word_embeddings": False}


def test_model_size_counts_the_parameters_config_json_describes(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    # embedding 32,000 * 1,024 = 32,768,000; per layer: attention 4 * 1,024^2 = 4,194,304,
    # MLP 3 * 1,024 * 4,096 = 12,582,912, two norms 2,048: 16,779,264, four layers 67,117,056;
    # final norm 1,024; untied output 32,768,000: 132,654,080
    assert model_size(tmp_path) == ModelSize(parameters=132_654_080, vocab=32_000, hidden=1024,
                                            intermediate=4096, layers=4, heads=8, kv_heads=8,
                                            head_dim=128, tied=False)


def test_tied_embeddings_are_counted_once(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, "tie_word_embeddings": True}))
    assert model_size(tmp_path).parameters == 132_654_080 - 32_768_000


# Every file transformers may read as text is a regular file of the folder's own, of bounded
# size, checked without reading it (run/model_folder.text_files_problem).


def _folder(tmp_path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    (folder / "tokenizer.json").write_text("{}")
    (folder / "README.md").symlink_to(tmp_path)  # a file transformers never reads: not checked
    return folder


@pytest.mark.parametrize(("name", "plant", "said"), [
    ("tokenizer.json", lambda path: os.mkfifo(path), "is a FIFO, not a regular file"),
    ("chat_template.jinja", lambda path: path.symlink_to("/dev/zero"),
     "is a symlink (to /dev/zero)"),
    ("additional_chat_templates/tools.jinja", lambda path: os.mkfifo(path), "is a FIFO"),
    ("merges.txt", lambda path: path.symlink_to(path.parent / "config.json"), "is a symlink"),
])
def test_a_text_file_that_is_a_link_or_special_file_is_refused_unread(tmp_path, name, plant,
                                                                      said):
    folder = _folder(tmp_path)
    (folder / name).parent.mkdir(exist_ok=True)
    (folder / name).unlink(missing_ok=True)
    plant(folder / name)
    problem = settings_problem(folder)
    assert problem.startswith(f"its {name} is refused: {folder / name} ") and said in problem


def test_a_text_file_over_128_mib_is_refused_by_its_size_and_one_at_the_bound_is_not(tmp_path):
    folder = _folder(tmp_path)
    with (folder / "tokenizer.json").open("wb") as handle:  # sparse: no bytes written
        handle.truncate(128 * 2**20)
    assert text_files_problem(folder) == ""
    with (folder / "tokenizer.json").open("wb") as handle:
        handle.truncate(128 * 2**20 + 1)
    assert text_files_problem(folder) == (
        "its tokenizer.json holds 134,217,729 bytes, more than the 134,217,728 a model's "
        "settings or tokenizer file may hold; copy the model's own file there")


def test_a_folder_of_regular_files_has_no_text_file_problem(tmp_path):
    assert settings_problem(_folder(tmp_path)) == ""
