"""load_policy: local checkpoints load, local-looking bad paths fail clearly without a download."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import time

import httpx
import pytest
import torch
from huggingface_hub.errors import RepositoryNotFoundError
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer

from agentcredit.config import ConfigError
from agentcredit.config.checks import ModelSize
from agentcredit.run.model_folder import looks_local
from agentcredit.train import model_loading
from agentcredit.train.model_loading import ModelLoadError, load_policy


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
    assert looks_local(name) is local


def test_an_owner_slash_name_whose_owner_is_a_local_folder_is_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert looks_local("runs/tiny") is True
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


# A model folder runs no code of its own and its weights are the model (run/model_folder.py).


def _edit_json(path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("settings", ["config.json", "tokenizer_config.json"])
def test_an_auto_map_is_refused_in_one_line_naming_the_key_and_nothing_is_imported(
        tmp_path, tiny_model_dir, settings):
    checkpoint = _damaged_copy(tmp_path, tiny_model_dir, "remote")
    marker = tmp_path / "ran"
    (checkpoint / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    _edit_json(checkpoint / settings, model_type="evil",
               auto_map={"AutoModelForCausalLM": "modeling_evil.EvilModel",
                         "AutoTokenizer": ["modeling_evil.EvilTokenizer", None]})
    with pytest.raises(ModelLoadError) as err:
        load_policy(str(checkpoint))
    assert f"its {settings} has an 'auto_map' key" in str(err.value)
    assert "\n" not in str(err.value) and not marker.exists()


def _rewrite_weights(checkpoint, change) -> None:
    path = checkpoint / "model.safetensors"
    save_file(change(load_file(path)), path, metadata={"format": "pt"})


@pytest.mark.parametrize(("change", "clause"), [
    (lambda t: {}, "its model.safetensors holds no tensors"),
    (lambda t: {k: v for k, v in t.items() if k != "model.norm.weight"},
     "the weights lack 1 of the"),
    (lambda t: {**t, "model.norm.weight": torch.ones(7)},
     "the weights give model.norm.weight the shape [7]"),
    (lambda t: {**t, "model.norm.weight": torch.full_like(t["model.norm.weight"], float("inf"))},
     "its model.safetensors holds NaN or infinite values in model.norm.weight"),
])
def test_weights_that_load_but_are_not_the_model_are_refused(tmp_path, tiny_model_dir, change,
                                                             clause):
    checkpoint = _damaged_copy(tmp_path, tiny_model_dir, "not_the_model")
    _rewrite_weights(checkpoint, change)
    with pytest.raises(ModelLoadError, match="cannot load the model") as err:
        load_policy(str(checkpoint))
    assert clause in str(err.value) and "\n" not in str(err.value)


def test_pickled_weights_are_never_loaded(tmp_path, tiny_model_dir):
    checkpoint = _damaged_copy(tmp_path, tiny_model_dir, "pickled")
    torch.save(load_file(checkpoint / "model.safetensors"), checkpoint / "pytorch_model.bin")
    (checkpoint / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match="holds no .safetensors weights .*pytorch_model.bin "
                                             "is pickled and is never loaded"):
        load_policy(str(checkpoint))


def test_weights_linked_from_outside_the_folder_are_refused(tmp_path, tiny_model_dir):
    checkpoint = _damaged_copy(tmp_path, tiny_model_dir, "linked")
    outside = tmp_path / "elsewhere.safetensors"
    shutil.move(checkpoint / "model.safetensors", outside)
    (checkpoint / "model.safetensors").symlink_to(outside)
    with pytest.raises(ModelLoadError, match="its model.safetensors is refused: .* is a symlink"):
        load_policy(str(checkpoint))


def test_a_chat_template_that_fails_in_the_sandbox_is_refused(tmp_path, tiny_model_dir):
    checkpoint = _damaged_copy(tmp_path, tiny_model_dir, "escape")
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    tokenizer.chat_template = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    tokenizer.save_pretrained(checkpoint)
    with pytest.raises(ModelLoadError, match="fails in Jinja's sandbox .*SecurityError"):
        load_policy(str(checkpoint))


def test_a_chat_template_that_renders_for_too_long_is_refused(tmp_path, tiny_model_dir,
                                                              monkeypatch):
    checkpoint = _damaged_copy(tmp_path, tiny_model_dir, "slow")
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    tokenizer.chat_template = ("{% for i in range(100000) %}{% for j in range(100000) %}"
                               "{% endfor %}{% endfor %}{{ messages[0]['content'] }}")
    tokenizer.save_pretrained(checkpoint)
    monkeypatch.setattr(model_loading, "TEMPLATE_SECONDS", 0.3)
    began = time.perf_counter()
    with pytest.raises(ModelLoadError, match=r"took more than 0.3 s to render a two-message"):
        load_policy(str(checkpoint))
    assert time.perf_counter() - began < 30


# The template is rendered apart, on a short and a long chat, within bounds of time, memory
# and length (train/model_loading.py, module docstring).


def _with_template(tmp_path, tiny_model_dir, name: str, template: str):
    checkpoint = _damaged_copy(tmp_path, tiny_model_dir, name)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    tokenizer.chat_template = template
    tokenizer.save_pretrained(checkpoint)
    return checkpoint


#: a template that renders its messages' text, and ``{}`` first when the user's text is longer
#: than 1,000 characters (the short check's is 17, a real agent prompt's thousands)
_ON_LONG = ("{{% if messages[-1]['content']|length > 1000 %}}{}{{% endif %}}"
            "{{% for m in messages %}}{{{{ m['content'] }}}}{{% endfor %}}")


def test_a_template_that_allocates_gigabytes_is_refused_without_this_process_growing(
        tmp_path, tiny_model_dir):
    checkpoint = _with_template(tmp_path, tiny_model_dir, "bomb", "{{ 'x' * 3000000000 }}")
    grown_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    began = time.perf_counter()
    with pytest.raises(ModelLoadError, match=r"needed more than 512 MiB to render a two-message "
                                             r"chat \(MemoryError\)") as err:
        load_policy(str(checkpoint))
    assert "\n" not in str(err.value) and time.perf_counter() - began < 20
    # the 3 GB string is refused in the child: this process's peak stays where it was
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - grown_before < 256 * 1024


def test_a_template_that_loops_only_on_long_prompts_is_refused_within_its_time(
        tmp_path, tiny_model_dir, monkeypatch):
    loop = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    checkpoint = _with_template(tmp_path, tiny_model_dir, "loops", _ON_LONG.format(loop))
    monkeypatch.setattr(model_loading, "TEMPLATE_SECONDS", 0.3)
    began = time.perf_counter()
    with pytest.raises(ModelLoadError, match=r"took more than 0.3 s to render a 200-step agent "
                                             r"prompt of [\d,]+ characters"):
        load_policy(str(checkpoint))
    assert time.perf_counter() - began < 10  # the loop alone runs for hours


def test_a_template_that_raises_only_on_long_prompts_is_refused_with_its_message(
        tmp_path, tiny_model_dir):
    checkpoint = _with_template(tmp_path, tiny_model_dir, "raises", _ON_LONG.format(
        "{{ raise_exception('this template takes prompts of at most 1000 characters') }}"))
    with pytest.raises(ModelLoadError) as err:
        load_policy(str(checkpoint))
    assert re.fullmatch(
        r"the chat template of '.*raises' fails in Jinja's sandbox on a 200-step agent prompt "
        r"of [\d,]+ characters \(TemplateError: this template takes prompts of at most 1000 "
        r"characters\); fix chat_template in its tokenizer_config.json \(or "
        r"chat_template.jinja\)", str(err.value))


def test_a_template_that_renders_a_long_prompt_far_longer_than_its_text_is_refused(
        tmp_path, tiny_model_dir):
    checkpoint = _with_template(tmp_path, tiny_model_dir, "grows",
                                _ON_LONG.format("{{ 'x' * 1000000 }}"))
    with pytest.raises(ModelLoadError) as err:
        load_policy(str(checkpoint))
    said = re.search(r"as ([\d,]+) characters, more than the ([\d,]+) a prompt may grow to \(4 "
                     r"times the ([\d,]+) characters of its messages plus 65,536\)",
                     str(err.value))
    rendered, bound, text = (int(n.replace(",", "")) for n in said.groups())
    assert rendered == 1_000_000 + text and bound == 4 * text + 65_536


def test_a_render_whose_process_is_killed_is_refused_naming_the_signal(tmp_path, tiny_model_dir,
                                                                      monkeypatch):
    checkpoint = _damaged_copy(tmp_path, tiny_model_dir, "killed")
    tests = os.getpid()

    def killed(extra):  # as the out-of-memory killer would, before the child says a word
        assert os.getpid() != tests, "the template was rendered in the tests' own process"
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(model_loading, "_cap_memory", killed)
    with pytest.raises(ModelLoadError, match=r"ended the process rendering a two-message chat "
                                             r"\(signal 9\)"):
        load_policy(str(checkpoint))


@pytest.mark.parametrize(("extra", "loads"), [(0, True), (1, False)])
def test_the_short_chat_may_render_to_four_times_its_text_plus_65536_characters(
        tmp_path, tiny_model_dir, extra, loads):
    # the short chat's text: "You are an agent in a text world." (33) + "go to the kitchen"
    # (17) = 50 characters, so at most 4 * 50 + 65,536 = 65,736 rendered
    template = ("{% if messages[-1]['content']|length < 100 %}{{ 'x' * " + str(65_736 + extra)
                + " }}{% endif %}")
    checkpoint = _with_template(tmp_path, tiny_model_dir, f"edge{extra}", template)
    if loads:
        load_policy(str(checkpoint))
        return
    with pytest.raises(ModelLoadError, match="renders a two-message chat as 65,737 characters, "
                                             "more than the 65,736 a prompt may grow to"):
        load_policy(str(checkpoint))


def test_an_untouched_folder_still_loads(tmp_path, tiny_model_dir):
    model, _ = load_policy(str(_damaged_copy(tmp_path, tiny_model_dir, "fine")))
    assert all(torch.isfinite(p).all() for p in model.parameters())


def _no_hub(monkeypatch, *, cached: str | None = None, offline: bool = False,
            answer: Exception | None = None) -> list[dict]:
    """The hub as the tests see it: nothing is loaded from it (from_pretrained fails the test),
    the probe raises ``answer``; returns the probe's calls."""
    calls = []

    def probe(url, **kwargs):
        calls.append({"url": url, **kwargs})
        if answer is not None:
            raise answer

    def never(*args, **kwargs):
        raise AssertionError("from_pretrained was called: the hub would be retried")

    monkeypatch.setattr(model_loading, "try_to_load_from_cache", lambda repo, name: cached)
    monkeypatch.setattr(model_loading, "is_offline_mode", lambda: offline)
    monkeypatch.setattr(model_loading, "get_hf_file_metadata", probe)
    monkeypatch.setattr(model_loading.AutoTokenizer, "from_pretrained", never)
    return calls


def test_a_hub_id_neither_cached_nor_reachable_is_refused_at_once_naming_it(monkeypatch):
    calls = _no_hub(monkeypatch, answer=httpx.ConnectError("[Errno -2] Name or service not known"))
    began = time.perf_counter()
    with pytest.raises(ModelLoadError) as err:
        load_policy("nobody/nothing")
    assert time.perf_counter() - began < 1
    says = str(err.value)
    assert "\n" not in says and says.startswith(
        "the model 'nobody/nothing' is neither a local folder nor in the hub cache")
    assert "cannot be reached in 5 s (ConnectError" in says and "HF_HUB_OFFLINE=1" in says
    assert [(c["url"].split("/")[-4:], c["timeout"]) for c in calls] == [
        (["nothing", "resolve", "main", "config.json"], model_loading.HUB_PROBE_SECONDS)]


def test_a_hub_id_the_hub_does_not_have_is_refused_naming_it(monkeypatch):
    missing = RepositoryNotFoundError("404 Client Error: Repository Not Found",
                                      response=httpx.Response(404, request=httpx.Request(
                                          "HEAD", "https://huggingface.co")))
    _no_hub(monkeypatch, answer=missing)
    with pytest.raises(ModelLoadError, match=r"^the model 'nobody/nothing' is neither a local "
                       r"folder nor a model on the hub \(404 Client Error"):
        load_policy("nobody/nothing")


def test_offline_a_hub_id_not_in_the_cache_is_refused_without_a_request(monkeypatch):
    calls = _no_hub(monkeypatch, offline=True)
    with pytest.raises(ModelLoadError, match="and HF_HUB_OFFLINE is set; pass the path"):
        load_policy("nobody/nothing")
    assert calls == []


def test_a_cached_hub_model_is_read_from_the_cache_when_the_hub_cannot_answer(monkeypatch):
    _no_hub(monkeypatch, cached="/cache/config.json", answer=httpx.ConnectTimeout("timed out"))
    assert model_loading.hub_local_only("someone/model") is True
    _no_hub(monkeypatch, cached="/cache/config.json", offline=True)
    assert model_loading.hub_local_only("someone/model") is True
    _no_hub(monkeypatch)  # the hub answers: it is asked for the files
    assert model_loading.hub_local_only("someone/model") is False


def test_a_hub_model_is_sized_from_its_config_before_any_weight_is_fetched(monkeypatch):
    _no_hub(monkeypatch)  # the hub answers; from_pretrained fails the test
    sized = []
    monkeypatch.setattr(model_loading, "model_size",
                        lambda source, local_only: sized.append((source, local_only))
                        or ModelSize(parameters=7_000_000_000, vocab=150_000, hidden=3584,
                                                intermediate=18944, layers=28, heads=28,
                                                kv_heads=4, head_dim=128, tied=False))

    def too_big(size):
        raise ConfigError(f"{size.parameters:,} parameters do not fit")

    with pytest.raises(ConfigError, match="7,000,000,000 parameters do not fit"):
        load_policy("someone/big-model", check_size=too_big)
    assert sized == [("someone/big-model", False)]
