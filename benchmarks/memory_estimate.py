"""The memory estimate against a real update's peak resident memory on CPU (issue 63).

For a few random-init Qwen2 models, each case runs in a fresh subprocess: it imports torch,
transformers and agentcredit, reads its resident memory (``VmRSS``: the baseline, right
before the model is built), builds the model in float32, then runs what one update runs on
the trained policy with every row at its full length (``rollout.max_prompt_tokens`` prompt
tokens and ``rollout.max_new_tokens`` response tokens, so the estimate's lengths are the real
ones): the scoring pass for the old log-probs (``train.scoring.behaviour_pass.score_steps``)
and one PPO update (``train.ppo.ppo_update``, AdamW, ``optim.layout=rows`` so each forward holds
``optim.micro_batch_size`` rows, under ``recomputed_layers`` when checkpointing). The peak is
``ru_maxrss`` minus the baseline.

It is compared with ``memory_estimate`` of the same sizes over what ran: the held terms plus
the larger of the scoring and PPO phases. Sampling is not run (its cache would need real
prompts), so its phase is left out of the comparison and reported beside it.

    python benchmarks/memory_estimate.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

CASES = {
    # name: (Qwen2 sizes, run overrides)
    "h512_L8_rows4": (
        {"hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 8,
         "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 32_000},
        ["optim.micro_batch_size=4", "optim.score_micro_batch_size=8",
         "rollout.max_prompt_tokens=384", "rollout.max_new_tokens=128",
         "optim.gradient_checkpointing=false"]),
    "h768_L6_rows2_ckpt": (
        {"hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 6,
         "num_attention_heads": 12, "num_key_value_heads": 4, "vocab_size": 48_000},
        ["optim.micro_batch_size=2", "optim.score_micro_batch_size=4",
         "rollout.max_prompt_tokens=768", "rollout.max_new_tokens=256",
         "optim.gradient_checkpointing=true"]),
    "h384_L12_rows8": (
        {"hidden_size": 384, "intermediate_size": 1024, "num_hidden_layers": 12,
         "num_attention_heads": 6, "num_key_value_heads": 2, "vocab_size": 16_000},
        ["optim.micro_batch_size=8", "optim.score_micro_batch_size=8",
         "rollout.max_prompt_tokens=256", "rollout.max_new_tokens=64",
         "optim.gradient_checkpointing=false"]),
}
ROWS = 8
"""Step rows of the update: one rollout of one step each (``rollout.tasks_per_update``)."""


def run_config(overrides: list[str]):
    """The run config of a case: the hf preset on CPU in float32, no SFT, no reference."""
    from agentcredit.config import load_config

    return load_config("hf", ["run.device=cpu", "model.dtype=float32", "optim.kl_coef=0",
                              "sft.enabled=false", "rollout.group_size=1",
                              f"rollout.tasks_per_update={ROWS}", "rollout.max_steps=1",
                              "optim.mini_batches=1", "optim.layout=rows", *overrides])


def resident_bytes() -> int:
    """This process's resident memory now (``VmRSS``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def measure(name: str, folder: Path) -> dict:
    """Run one case in this process; its figures in bytes (``folder``: where its config.json
    is written)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from agentcredit.config.checks import memory_estimate
    from agentcredit.run.model_folder import model_size
    from agentcredit.train.activation_checkpointing import recomputed_layers
    from agentcredit.train.ppo import PPOBatch, ppo_update
    from agentcredit.train.scoring.behaviour_pass import score_steps
    from agentcredit.train.step_tensors import StepTensors

    sizes, overrides = CASES[name]
    config = run_config(overrides)
    prompt, response = config.rollout.max_prompt_tokens, config.rollout.max_new_tokens
    length = prompt + response
    torch.set_num_threads(2)
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1, sizes["vocab_size"], (ROWS, length), generator=generator)
    attention = torch.ones(ROWS, length, dtype=torch.long)
    loss_mask = torch.arange(length)[None].expand(ROWS, -1) >= prompt
    steps = StepTensors(input_ids=input_ids, attention_mask=attention, loss_mask=loss_mask,
                        sampling_logprobs=torch.zeros(ROWS, length),
                        step_rollout=torch.arange(ROWS))
    advantages = torch.randn(ROWS, 1, generator=generator) * loss_mask.float()

    baseline = resident_bytes()
    torch.manual_seed(0)
    qwen = Qwen2Config(**sizes, max_position_embeddings=2 * length, tie_word_embeddings=True,
                       use_sliding_window=False)
    model = Qwen2ForCausalLM(qwen).float()
    optim = config.optim
    optimizer = torch.optim.AdamW(model.parameters(), lr=optim.lr)
    old = score_steps(model, steps, optim.score_micro_batch_size, layout=optim.layout)
    with recomputed_layers(model, optim.gradient_checkpointing):
        ppo_update(model, optimizer, PPOBatch(steps, old, advantages), optim,
                   torch.Generator().manual_seed(1))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - baseline

    qwen.save_pretrained(folder)  # the shapes as model_size reads them from config.json
    estimate = memory_estimate(config, model_size(folder))
    ran = {key: value for key, value in estimate.phases.items() if key in ("scoring", "ppo")}
    ran_total = sum(estimate.held.values()) + max(sum(t.values()) for t in ran.values())
    return {"baseline_rss": baseline, "peak_minus_baseline": peak,
            "estimate_of_what_ran": ran_total, "ratio": peak / ran_total,
            "parameters": sum(p.numel() for p in model.parameters()),
            "held": estimate.held, "phases": estimate.phases,
            "full_estimate_with_generation": estimate.total}


def main() -> None:
    from bench_common import BenchmarkParser

    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first case only")
    # hidden: main runs each case in a process of its own as --case NAME FOLDER
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("folder", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if (args.case is None) != (args.folder is None):
        parser.error("--case NAME and FOLDER go together (the benchmark passes them to each "
                     "case's process); run it with [--quick] alone")
    if args.case:
        print(json.dumps(measure(args.case, Path(args.folder))))
        return
    import tempfile

    from bench_common import write_result

    metrics = {}
    for name in list(CASES)[:1] if args.quick else CASES:
        with tempfile.TemporaryDirectory() as folder:
            out = subprocess.run([sys.executable, __file__, "--case", name, folder],
                                 capture_output=True, text=True, check=True)
        metrics[name] = json.loads(out.stdout.strip().splitlines()[-1])
        m = metrics[name]
        print(f"{name}: peak - baseline {m['peak_minus_baseline'] / 2**20:,.0f} MiB, estimate "
              f"{m['estimate_of_what_ran'] / 2**20:,.0f} MiB, ratio {m['ratio']:.2f}",
              flush=True)
    within = all(0.75 <= m["ratio"] <= 1.25 for m in metrics.values())
    write_result("memory_estimate", {name: {"qwen2": CASES[name][0], "overrides": CASES[name][1],
                                            "rows": ROWS} for name in metrics},
                 metrics, {"peak / estimate": "within 0.75 to 1.25", "met": within},
                 "ru_maxrss minus VmRSS read right before the model is built, in a fresh "
                 "process per case; the estimate counts the held terms and the larger of the "
                 "scoring and PPO phases (sampling is not run).", args.quick)


if __name__ == "__main__":
    from bench_common import run_script

    run_script(main)
