"""The real-shape CPU check and the prepared GPU check: the hf preset they run, and the GPU
check's figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from agentcredit.config import load_config
from agentcredit.config.checks import check_memory
from agentcredit.run.model_folder import model_size
from gpu_check import gpu_figures
from real_shape import QWEN25_05B, arguments, run_overrides

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_real_shape_run_is_the_hf_preset_with_its_precision_and_checkpointing(tmp_path):
    args = arguments().parse_args([])
    config = load_config("hf", run_overrides(args, tmp_path / "model", tmp_path / "runs"))
    assert config.model.dtype == "bfloat16" and config.model.fp32_lm_head
    assert config.optim.gradient_checkpointing and config.optim.kl_coef > 0
    assert (config.rollout.tasks_per_update, config.rollout.group_size,
            config.rollout.max_steps) == (2, 2, 5)


def test_its_model_is_qwen25_05b_and_fits_an_80_gb_card_with_the_preset(tmp_path):
    import json

    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
         "tie_word_embeddings": True, **QWEN25_05B}))
    size = model_size(tmp_path)
    assert size.parameters == 494_032_768  # Qwen2.5-0.5B-Instruct's count
    check_memory(load_config("hf"), size, (80 * 10**9, "the GPU"))


def test_the_mfu_is_six_flops_per_parameter_and_trained_token_over_the_peak():
    result = {"parameters": 500_000_000, "peak_bytes": 30, "estimate_bytes": 40,
              "updates": [{"tokens/generated_per_s": g, "tokens/trained_per_s": t}
                          for g, t in ((900.0, 1000.0), (1100.0, 3000.0), (1000.0, 2000.0))]}
    # median trained 2,000 tokens/s: 6 * 5e8 * 2e3 = 6e12 FLOP/s of a 1e15 peak
    assert gpu_figures(result, 1000.0) == {"generation_tokens_per_s": 1000.0,
                                           "ppo_mfu": pytest.approx(0.006),
                                           "peak_over_estimate": 0.75}


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_the_gpu_check_without_a_gpu_is_one_line_and_exit_2():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_check.py")],
                          capture_output=True, text=True, cwd=BENCHMARKS, check=False)
    assert done.returncode == 2
    assert done.stderr == "error: torch sees no CUDA device here; run this on the GPU machine\n"
