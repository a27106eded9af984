"""SFT on prefix trees against SFT on rows: the same epoch of the embedded default, timed in pairs.

The embedded default's demonstration samples (every train game's expert episodes as the warm
start plays them, with recovery samples) are built once; then, from one start model (a run's
``reference/``, or a fresh embedded tiny model), ``--pairs`` alternated pairs (trees, rows,
rows, trees, ...) each time ``--epochs`` of ``run_sft`` under ``optim.layout=trees`` and under
``rows``, from the same weights and the same batch order, in this one process, one thread.

Figures: ``sft_epoch_s.trees`` / ``.rows`` (medians of seconds per epoch),
``sft_trees_speedup`` (the median over pairs of rows' seconds over trees', the headline),
``tokens_per_epoch.trees`` / ``.rows`` (tokens the forwards compute, ``PrefixTree.tokens``),
``forwards_per_epoch.trees`` / ``.rows`` (model forwards, trunks and branch batches) and
``loss_gap`` (the largest difference of an epoch's mean loss between the layouts: float
rounding only).

    python benchmarks/sft_layouts.py [--model DIR] [--pairs 3] [--epochs 0.25] [--quick]
"""

from __future__ import annotations

import copy
import statistics
import tempfile
import time
from pathlib import Path

import torch

from agentcredit.config import load_config
from agentcredit.train.build import collector_config
from agentcredit.train.model_loading import load_policy
from agentcredit.train.prefix_tree import layout_trees
from agentcredit.train.step_tensors import tensorize_steps
from agentcredit.train.warm_start.model_bootstrap import bootstrap_tiny_model
from agentcredit.train.warm_start.sft import (
    demonstration_steps,
    demonstration_texts,
    expert_demonstrations,
    run_sft,
    sft_batches,
)
from agentcredit.train.warm_start.start_policy import demonstration_settings
from bench_common import (
    BenchmarkParser,
    at_least,
    model_folder,
    number_from,
    run_script,
    write_result,
)


def samples_and_model(model_dir: str | None, quick: bool, epochs: float):
    """The embedded default's config with ``sft.epochs=epochs``, its SFT samples and the start
    model (``model_dir`` or a fresh tiny model fitted on the demonstrations)."""
    overrides = ["env.train_games_per_type=2"] if quick else []
    config = load_config(None, [*overrides, f"sft.epochs={epochs}"])
    suite = config.env.build_suite()
    env = suite.make_env()
    copies, noise, _ = demonstration_settings(config, env)
    demos = expert_demonstrations(env, suite.tasks("train"), copies=copies, noise=noise,
                                  seed=config.run.seed)
    if model_dir is None:
        texts = demonstration_texts(demos, config.rollout.action_format,
                                    config.rollout.history_style)
        model_dir = str(bootstrap_tiny_model(texts, Path(tempfile.mkdtemp()) / "tiny",
                                             config.model.tiny))
    model, tokenizer = load_policy(model_dir)
    samples = demonstration_steps(demos, tokenizer, collector_config(config).prompt,
                                  recovery=config.sft.recovery, seed=config.run.seed,
                                  decoding=config.rollout.decoding)
    return config, samples, model, tokenizer


def layout_counts(model, samples, pad_id: int, config, layout: str) -> tuple[int, int]:
    """Tokens and forwards of one epoch of SFT under ``layout``."""
    data = tensorize_steps(samples, pad_id)
    lengths = data.attention_mask.sum(1)
    batches, per_epoch = sft_batches(data.step_rollout, config.sft.batch_size, 1.0,
                                     torch.Generator().manual_seed(0))
    tokens = forwards = 0
    for rows in batches[:per_epoch]:
        for tree in layout_trees(model, data, layout, rows):
            tokens += tree.tokens(lengths)
            forwards += (tree.trunk_len > 0) + len(tree.batches(config.sft.micro_batch_size))
    return tokens, forwards


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, type=model_folder,
                        help="a start model folder (default: a fresh embedded tiny model)")
    parser.add_argument("--pairs", type=at_least(1), default=3)
    # sft.epochs, read by the config loader; above 0, as the seconds are per epoch
    parser.add_argument("--epochs", type=number_from(0, above=True), default=0.25)
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config, samples, model, tokenizer = samples_and_model(args.model, args.quick, args.epochs)
    sft = config.sft
    start = copy.deepcopy(model.state_dict())
    seconds: dict[str, list[float]] = {"trees": [], "rows": []}
    losses: dict[str, list[float]] = {"trees": [], "rows": []}
    pairs = [("trees", "rows") if k % 2 == 0 else ("rows", "trees") for k in range(args.pairs)]
    for pair in pairs:
        for layout in pair:
            model.load_state_dict(start)
            began = time.perf_counter()
            stats = run_sft(model, samples, tokenizer.pad_token_id, sft,
                            torch.Generator().manual_seed(0), layout=layout)
            seconds[layout].append((time.perf_counter() - began) / args.epochs)
            losses[layout].append(stats["sft/final_loss"])
            print(f"{layout}: {seconds[layout][-1]:.1f} s per epoch", flush=True)
    metrics = {f"sft_epoch_s.{name}": statistics.median(values)
               for name, values in seconds.items()}
    metrics["sft_trees_speedup"] = statistics.median(
        r / t for r, t in zip(seconds["rows"], seconds["trees"], strict=True))
    for layout in ("trees", "rows"):
        tokens, forwards = layout_counts(model, samples, tokenizer.pad_token_id, config, layout)
        metrics[f"tokens_per_epoch.{layout}"] = float(tokens)
        metrics[f"forwards_per_epoch.{layout}"] = float(forwards)
    metrics["loss_gap"] = max(abs(t - r) for t, r in zip(losses["trees"], losses["rows"],
                                                         strict=True))
    metrics["samples"] = float(sum(len(t.steps) for t in samples))
    path = write_result(
        "sft_layouts", {"pairs": args.pairs, "epochs": args.epochs, "threads": 1,
                        "batch_size": config.sft.batch_size,
                        "micro_batch_size": config.sft.micro_batch_size,
                        "model": args.model or "a fresh embedded tiny model"},
        metrics, {"sft_trees_speedup": {"min": 1.5}},
        "SFT of the embedded default's demonstrations from one start, trees and rows "
        "alternated in one process on one thread; sft_trees_speedup is the median over pairs "
        "of rows' seconds over trees'.", args.quick)
    print(metrics)
    print(f"wrote {path}")


if __name__ == "__main__":
    run_script(main)
