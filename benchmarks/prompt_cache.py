"""Rollout collection with and without the prompt cache, on the same tasks and seed.

An SFT start of the embedded default plays 4 train tasks x 8 rollouts at temperature 0.4,
alternately with ``rollout.reuse_prompt_cache`` off (every prompt prefilled in full) and on
(each step prefills only the tokens after the prefix it shares with a cached prompt); two
repetitions of each, in one process; medians.

Figures: ``full_prefill_s`` and ``cached_s`` (medians of the collection's wall time),
``full_over_cached`` (their ratio, > 1 when the cache saves time), ``steps`` and ``won``
of each mode, and ``same_actions`` (whether both modes played the same actions).

    python benchmarks/prompt_cache.py --model SFT_DIR [--threads 1] [key=value ...]
"""

from __future__ import annotations

import statistics
import time

import torch

from agentcredit.config import load_config
from agentcredit.train.build import load_model, make_collector
from bench_common import parse_start_args, run_script, write_result

REPEATS = 2


def main() -> None:
    args = parse_start_args(__doc__.splitlines()[0])
    seconds: dict[bool, list[float]] = {False: [], True: []}
    actions: dict[bool, list] = {}
    for _ in range(REPEATS):
        for reuse in (False, True):
            config = load_config(None, [f"model.name={args.model}", "sft.enabled=false",
                                        *args.overrides,
                                        f"rollout.reuse_prompt_cache={str(reuse).lower()}"])
            suite = config.env.build_suite()
            model, tokenizer = load_model(config, config.model.name)
            collector = make_collector(config, model, tokenizer, suite)
            began = time.perf_counter()
            trajectories = collector.collect(suite.tasks("train")[:4], 8,
                                             temperature=config.rollout.temperature,
                                             generator=torch.Generator().manual_seed(0))
            seconds[reuse].append(time.perf_counter() - began)
            actions[reuse] = [[s.action for s in t.steps] for t in trajectories]
            won = sum(t.won for t in trajectories)
            print(f"reuse_prompt_cache={reuse}: {seconds[reuse][-1]:.1f} s, "
                  f"{sum(map(len, actions[reuse]))} steps, {won} won", flush=True)
    full, cached = statistics.median(seconds[False]), statistics.median(seconds[True])
    metrics = {"full_prefill_s": round(full, 2), "cached_s": round(cached, 2),
               "full_over_cached": round(full / cached, 2),
               "steps": {str(k): sum(map(len, v)) for k, v in actions.items()},
               "same_actions": actions[False] == actions[True]}
    path = write_result("prompt_cache", {"model": args.model, "threads": args.threads,
                                         "tasks": 4, "group_size": 8, "repeats": REPEATS,
                                         "overrides": args.overrides},
                        metrics, {"full_over_cached": "> 1"},
                        "Same tasks, seed and model in both modes; timings from one process, "
                        "alternating the modes.", quick=False)
    print(f"{metrics}\nwrote {path}")


if __name__ == "__main__":
    run_script(main)
