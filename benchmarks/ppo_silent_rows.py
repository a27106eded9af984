"""The PPO step with and without the rows that carry no gradient, on one real batch.

One batch of GRPO rollouts (8 train tasks x 8 rollouts at temperature 1) is played by an
SFT start of the embedded default; the same PPO update (the embedded default's optimiser
settings, a fresh AdamW each time) is then timed as the trainer runs it, skipping the rows
whose advantage is 0 everywhere (``train.ppo._rows_with_gradient``), and with every row run
(``optim.entropy_coef`` = 1e-30 makes every row carry a gradient and changes nothing else
measurable). Three repetitions of each, in one process; medians.

Figures: ``trained_rows_share`` (the rows the skip keeps), ``skip_s`` and ``all_rows_s``
(medians of the update's wall time) and ``all_rows_over_skip`` (their ratio, > 1 when the
skip saves time), plus the batch's ``rollouts``, ``won`` and ``steps``.

    python benchmarks/ppo_silent_rows.py --model SFT_DIR [--threads 1] [key=value ...]
"""

from __future__ import annotations

import copy
import dataclasses
import statistics
import time

import torch

from agentcredit.config import estimator_config, load_config
from agentcredit.credit import get_estimator
from agentcredit.credit.batch import CreditBatch
from agentcredit.train.build import load_model, make_collector
from agentcredit.train.ppo import PPOBatch, ppo_update
from agentcredit.train.step_tensors import tensorize_steps
from bench_common import parse_start_args, run_script, write_result

REPEATS = 3


def main() -> None:
    args = parse_start_args(__doc__.splitlines()[0])
    config = load_config(None, [f"model.name={args.model}", "sft.enabled=false",
                                *args.overrides])
    suite = config.env.build_suite()
    model, tokenizer = load_model(config, config.model.name)
    tasks = suite.tasks("train")[::30][:8]
    trajectories = make_collector(config, model, tokenizer, suite).collect(
        tasks, config.rollout.group_size, temperature=1.0,
        generator=torch.Generator().manual_seed(0))
    steps = tensorize_steps(trajectories, tokenizer.pad_token_id)
    batch = CreditBatch.from_lists([[s.reward for s in t.steps] for t in trajectories],
                                   [t.group_id for t in trajectories])
    result = get_estimator("grpo")(batch, estimator_config(config.credit))
    advantages = result.per_token(steps.loss_mask)  # [S, L]
    metrics: dict[str, float] = {"rollouts": len(trajectories),
                                 "won": sum(t.won for t in trajectories),
                                 "steps": int(steps.input_ids.shape[0])}
    for name, entropy_coef in (("skip", 0.0), ("all_rows", 1e-30)):
        optim = dataclasses.replace(config.optim, entropy_coef=entropy_coef)
        seconds = []
        for _ in range(REPEATS):
            trained = copy.deepcopy(model)
            optimizer = torch.optim.AdamW(trained.parameters(), lr=optim.lr)
            began = time.perf_counter()
            stats = ppo_update(trained, optimizer,
                               PPOBatch(steps, steps.sampling_logprobs, advantages), optim,
                               torch.Generator().manual_seed(0))
            seconds.append(time.perf_counter() - began)
        metrics[f"{name}_s"] = round(statistics.median(seconds), 2)
        if name == "skip":
            metrics["trained_rows_share"] = round(stats["ppo/trained_rows"], 4)
    metrics["all_rows_over_skip"] = round(metrics["all_rows_s"] / metrics["skip_s"], 3)
    path = write_result("ppo_silent_rows",
                        config={"model": args.model, "threads": args.threads,
                                "overrides": args.overrides, "repeats": REPEATS},
                        metrics=metrics, targets={"all_rows_over_skip": "> 1"},
                        notes=__doc__.split("\n\n")[1].replace("\n", " "), quick=False)
    print(f"{path}: {metrics}")


if __name__ == "__main__":
    run_script(main)
