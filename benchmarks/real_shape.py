"""The ``hf`` preset's code path on a model of a real checkpoint's shape (issue 63).

A Qwen2.5-0.5B-Instruct architecture built from its config numbers (24 layers, hidden 896,
14 query and 2 key/value heads, MLP 4,864, vocabulary 151,936, tied embeddings; random
weights, nothing downloaded) is saved as a model folder and trained with
``agentcredit train --config hf --model FOLDER`` for a few small updates: the preset's
mixed precision (float32 weights, bfloat16 autocast, float32 LM head), gradient
checkpointing, the KL reference held in bfloat16, on WebShop (no engine to build).

The tokenizer: no registry package ships Qwen2.5's tokenizer files (``bpe-qwen`` 0.1.5 ships
a compiled tokenizer and no vocabulary files), so the embedded byte-level BPE is trained on a
few environment strings: it has Qwen2.5-Instruct's special tokens and chat template, and the
model's 151,936-wide embedding and LM head keep their real size (the ids past the tokenizer's
are masked at sampling, as for any checkpoint whose embedding is rounded up).

The training runs in a child process, so its figures are its own: the time of each phase
(the run's ``time/*`` metrics), generation tokens per second, the peak memory (CPU: the
child's peak resident set over what it held before the model loaded; CUDA:
``torch.cuda.max_memory_allocated``) against the run's memory estimate
(``config.checks.memory_estimate``), and how far the parameters moved (the saved policy
against the start: the share of entries that changed and ``‖Δθ‖ / ‖θ‖``).

    python benchmarks/real_shape.py                 # CPU: 1 update, 2 tasks x 2 rollouts x 5 steps
    python benchmarks/real_shape.py --quick         # a 2-layer model of the same width
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Qwen2.5-0.5B-Instruct's config numbers (its config.json)
QWEN25_05B = {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
              "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
              "max_position_embeddings": 32768, "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6}

#: the tokenizer's corpus: the prompts' fixed parts and a few WebShop-like strings
CORPUS = ["You are a shopping agent.", "search[blue cotton shirt under 30 dollars]",
          "click[Buy Now]", "click[< Prev]", "Instruction: i need a red dress, size m",
          "<think>the price fits</think><action>click[b07xyz]</action>"] * 20


def build_folder(folder: Path, layers: int) -> Path:
    """Write a model folder of Qwen2.5-0.5B's shape (``layers`` decoder layers) with the
    embedded tokenizer; random float32 weights, seed 0."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from agentcredit.rollout.prompts import system_message
    from agentcredit.train.warm_start.tokenizer_bootstrap import (
        IM_END_TOKEN,
        PAD_TOKEN,
        train_bpe_tokenizer,
    )

    tokenizer = train_bpe_tokenizer([system_message("tagged"), *CORPUS], vocab_size=2048,
                                    model_max_length=QWEN25_05B["max_position_embeddings"])
    pad, eos = (tokenizer.convert_tokens_to_ids(t) for t in (PAD_TOKEN, IM_END_TOKEN))
    numbers = {key: value for key, value in QWEN25_05B.items() if key != "rope_theta"}
    config = Qwen2Config(**{**numbers, "num_hidden_layers": layers},
                         rope_parameters={"rope_type": "default",
                                          "rope_theta": QWEN25_05B["rope_theta"]},
                         tie_word_embeddings=True, use_sliding_window=False,
                         pad_token_id=pad, bos_token_id=pad, eos_token_id=eos)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=pad, pad_token_id=pad,
                                               eos_token_id=[eos, pad])
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def run_overrides(args: argparse.Namespace, folder: Path, out: Path) -> list[str]:
    """The ``hf`` preset's overrides for one measured run."""
    return [f"model.name={folder}", f"run.device={args.device}", f"run.output_dir={out}",
            "run.name=real_shape", f"run.updates={args.updates}", "run.eval_every=0",
            "run.eval_at_start=false", f"run.checkpoint_every={args.updates}",
            "run.progress=false", "env=webshop", "env.webshop.num_products=200",
            # the evaluation after the last update (always run) plays 2 + 2 goals
            "env.webshop.valid_goals=2", "env.webshop.test_goals=2",
            f"rollout.tasks_per_update={args.tasks}",
            f"rollout.group_size={args.group}", f"rollout.max_steps={args.steps}",
            f"rollout.max_new_tokens={args.new_tokens}",
            f"rollout.generation_batch_size={args.tasks * args.group}",
            f"rollout.max_prompt_tokens={args.prompt_tokens}", "optim.mini_batches=1",
            f"optim.micro_batch_size={args.micro_batch}", "optim.entropy_coef=0.001",
            *args.overrides]


def child(args: argparse.Namespace) -> None:
    """Train once in this process and print the measurements as one JSON line."""
    import torch
    from safetensors.torch import load_file

    from agentcredit.config import load_config
    from agentcredit.config.checks import memory_estimate
    from agentcredit.run.model_folder import model_size
    from agentcredit.train.loop import train

    folder, out = Path(args.child), Path(args.out)
    config = load_config("hf", run_overrides(args, folder, out))
    before = _resident_bytes()
    cuda = config.run.device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    began = time.perf_counter()
    train(config, echo=lambda line: print(line, file=sys.stderr, flush=True))
    seconds = time.perf_counter() - began
    peak = (torch.cuda.max_memory_allocated() if cuda
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before)
    estimate = memory_estimate(config, model_size(str(folder), True))
    records = [json.loads(line) for line in (out / "real_shape" / "metrics.jsonl").open()]
    updates = [r for r in records if r.get("kind") == "update"]
    start = load_file(folder / "model.safetensors")
    saved = load_file(out / "real_shape" / "checkpoints" / f"update_{args.updates:05d}" /
                      "policy" / "model.safetensors")
    change = torch.cat([(saved[k].float() - start[k].float()).flatten() for k in start])
    norm = torch.cat([start[k].float().flatten() for k in start]).norm()
    print(json.dumps({
        "seconds": seconds,
        "parameters": sum(t.numel() for t in start.values()),
        "peak_bytes": peak,
        "estimate_bytes": estimate.total,
        "estimate_terms": estimate.terms,
        "share_moved": float((change != 0).double().mean()),
        "relative_change": float(change.norm() / norm),
        "updates": [{k: v for k, v in r.items()
                     if k.startswith(("time/", "tokens/", "ppo/grad_norm", "ppo/entropy"))}
                    for r in updates],
    }))


def _resident_bytes() -> int:
    """This process's resident memory now."""
    import os

    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(args: argparse.Namespace) -> dict:
    """Build the folder, train in a child process, return its measurements."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_folder(Path(tmp) / "model", args.layers)
        command = [sys.executable, __file__, "--child", str(folder), "--out",
                   str(Path(tmp) / "runs"),
                   *(f"--{key.replace('_', '-')}={getattr(args, key)}" for key in
                     ("device", "updates", "tasks", "group", "steps", "new_tokens",
                      "prompt_tokens", "micro_batch")), *args.overrides]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            from bench_common import BenchmarkFailed

            raise BenchmarkFailed(f"the training child failed:\n{done.stderr[-4000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def arguments(defaults: dict | None = None) -> argparse.ArgumentParser:
    """The command line of ``real_shape.py`` (``gpu_check.py`` passes its own defaults)."""
    from bench_common import BenchmarkParser, at_least, result_name

    # the rollout and optimiser sizes become config settings: the config loader checks them
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--updates", type=at_least(1), default=1)
    parser.add_argument("--tasks", type=int, default=2, help="rollout.tasks_per_update")
    parser.add_argument("--group", type=int, default=2, help="rollout.group_size")
    parser.add_argument("--steps", type=int, default=5, help="rollout.max_steps")
    parser.add_argument("--new-tokens", type=int, default=16, help="rollout.max_new_tokens")
    parser.add_argument("--prompt-tokens", type=int, default=1024,
                        help="rollout.max_prompt_tokens")
    parser.add_argument("--micro-batch", type=int, default=4, help="optim.micro_batch_size")
    parser.add_argument("--layers", type=at_least(1), default=QWEN25_05B["num_hidden_layers"])
    parser.add_argument("--quick", action="store_true", help="2 decoder layers, same width")
    parser.add_argument("--name", default="real_shape", type=result_name)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="further config overrides of the run")
    parser.set_defaults(**(defaults or {}))
    return parser


def check_settings(args: argparse.Namespace) -> None:
    """Load the measured run's config (``run_overrides``) and check its device, so a bad size,
    device or override stops the script before the model is built (``ConfigError``)."""
    from agentcredit.config import load_config
    from agentcredit.train.build import check_device

    check_device(load_config("hf", run_overrides(args, Path("model"), Path("runs"))),
                 training=True)


def main() -> None:
    args = arguments().parse_args()
    if args.child:
        child(args)
        return
    if args.quick:
        args.layers = 2
    check_settings(args)
    from bench_common import write_result

    result = measure(args)
    total = result["estimate_bytes"]
    result["peak_over_estimate"] = result["peak_bytes"] / total
    gib = 1 << 30
    print(f"{result['parameters']:,} parameters; {result['seconds']:.0f} s; peak "
          f"{result['peak_bytes'] / gib:.2f} GiB against an estimate of {total / gib:.2f} GiB "
          f"({result['peak_over_estimate']:.2f}x); {result['share_moved']:.1%} of entries "
          f"moved, |Δθ|/|θ| {result['relative_change']:.2e}")
    for update in result["updates"]:
        print("  " + "  ".join(f"{k} {v:.2f}" for k, v in update.items()))
    path = write_result(args.name, {k: v for k, v in vars(args).items()
                                    if k not in ("child", "out", "name")},
                        result, {"peak within the estimate's ±25%": "0.75 to 1.25"},
                        "the hf preset on a Qwen2.5-0.5B-shaped random model, WebShop, "
                        f"run.device={args.device}", args.quick)
    print(f"wrote {path}")


if __name__ == "__main__":
    from bench_common import run_script

    run_script(main)
