"""The prepared GPU check (issue 63): the ``hf`` preset's path on CUDA, 3 updates of a
Qwen2.5-0.5B-shaped model built from its config (random weights, nothing downloaded).

It runs ``benchmarks/real_shape.py``'s measurement with ``run.device=cuda`` and larger
rollouts, and prints and writes (``benchmarks/results/gpu_check.json``):

- generation tokens per second (each update's ``tokens/generated_per_s``, median);
- the PPO update's MFU: ``6 · P · T / (t · F)`` with ``P`` the parameters, ``T`` the response
  tokens trained on, ``t`` the update's seconds and ``F`` the GPU's dense bfloat16 peak
  (``--peak-tflops``, 989 for an H100 SXM). Prompt tokens are computed too (once per prefix
  tree), so this is a lower bound of the work done;
- the peak GPU memory (``torch.cuda.max_memory_allocated``) against the memory estimate;
- how far the parameters moved (share of entries, ``‖Δθ‖ / ‖θ‖``).

Sized to end in well under 8 minutes on one H100. On the device machine (its Python has
torch, transformers and tokenizers; WebShop's two dependencies travel as wheels downloaded
here into ``.whl``, which ``.git/info/exclude`` ignores)::

    pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \\
        --platform manylinux_2_17_x86_64 -d .whl 'bm25s>=0.3.16,<0.4' 'rapidfuzz>=3.14,<4'
    # device command (carry .whl):
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl &&
    PYTHONPATH=/tmp/site:src python3 benchmarks/gpu_check.py
"""

from __future__ import annotations

import statistics

from bench_common import number_from, run_script
from real_shape import arguments, check_settings, measure

DEFAULTS = {"device": "cuda", "updates": 3, "tasks": 4, "group": 4, "steps": 6,
            "new_tokens": 64, "prompt_tokens": 1024, "micro_batch": 4, "name": "gpu_check"}


def gpu_figures(result: dict, peak_tflops: float) -> dict[str, float]:
    """The check's figures from ``real_shape.measure``'s ``result``: generation tokens/s and
    the PPO update's MFU (module notes), medians over the updates, and peak over estimate."""
    updates = result["updates"]
    return {
        "generation_tokens_per_s": statistics.median(u["tokens/generated_per_s"]
                                                     for u in updates),
        "ppo_mfu": statistics.median(6 * result["parameters"] * u["tokens/trained_per_s"]
                                     / (peak_tflops * 1e12) for u in updates),
        "peak_over_estimate": result["peak_bytes"] / result["estimate_bytes"],
    }


def main() -> None:
    parser = arguments(DEFAULTS)
    parser.description = __doc__.splitlines()[0]
    parser.add_argument("--peak-tflops", type=number_from(0, above=True), default=989.0,
                        help="the GPU's dense bfloat16 peak (H100 SXM: 989)")
    args = parser.parse_args()
    import torch

    from bench_common import write_result

    if not torch.cuda.is_available():
        parser.exit(2, "error: torch sees no CUDA device here; run this on the GPU machine\n")
    check_settings(args)
    result = measure(args)
    result.update(gpu_figures(result, args.peak_tflops), gpu=torch.cuda.get_device_name())
    gib = 1 << 30
    print(f"{result['gpu']}: generation {result['generation_tokens_per_s']:,.0f} tokens/s; PPO "
          f"MFU {result['ppo_mfu']:.1%} (response tokens only); peak "
          f"{result['peak_bytes'] / gib:.1f} GiB against an estimate of "
          f"{result['estimate_bytes'] / gib:.1f} GiB; {result['share_moved']:.1%} of entries "
          f"moved, |Δθ|/|θ| {result['relative_change']:.2e}; {result['seconds']:.0f} s")
    path = write_result(args.name, {k: v for k, v in vars(args).items()
                                    if k not in ("child", "out", "name")},
                        result, {"wall time on one H100": "<= 480 s",
                                 "peak within the estimate's ±25%": "0.75 to 1.25"},
                        "the hf preset on CUDA, a Qwen2.5-0.5B-shaped random model, WebShop",
                        args.quick)
    print(f"wrote {path}")


if __name__ == "__main__":
    run_script(main)
