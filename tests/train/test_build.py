"""Inputs checked before anything expensive runs: the device, the packaged presets."""

from __future__ import annotations

import pytest
import torch

from agentcredit.config_schema import ConfigError
from agentcredit.train.build import check_device, collector_config
from agentcredit.train.config import load_config


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
