"""ALFWorld engine speed: reset and step times, with and without the grammar memo.

Small rooms are generated with ``max_receptacles=12`` (<= 25 receptacles, the
issue's target condition); large rooms keep the full floor plan. Memo on and
off are measured in the same run, alternating game by game, after each game's
first load (the first reset of a game also translates its PDDL and is
reported separately as ``load_median_ms``).

The fuzz part plays 10,000 hostile actions (``--quick``: 1,000) over the small
games (``tests/envs/fuzz_actions.py``, as the fuzz tests do) and records
``fuzz_actions``, ``fuzz_exceptions`` (the target: 0), ``fuzz_inconsistencies``
and ``fuzz_seconds`` (resets and game loads included); ``--only-fuzz`` runs only
that part and merges its figures into the existing results file.

    python benchmarks/alfworld_env.py [--quick] [--only-fuzz]
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

from agentcredit.envs.alfworld import grammar_memo
from agentcredit.envs.alfworld.engine import AlfWorldEnv
from agentcredit.envs.alfworld.generator import generate_game
from agentcredit.envs.alfworld.options import GeneratorConfig
from agentcredit.envs.alfworld.tasks import TASK_TYPES
from bench_common import (
    FUZZ_NOTE,
    FUZZ_TARGETS,
    BenchmarkParser,
    fuzz_figures,
    fuzz_results,
    merge_fuzz,
    run_script,
    write_result,
)


def _time_game(env: AlfWorldEnv, task, resets: int, steps: int, seed: int) -> tuple[list, list]:
    reset_ms, step_ms = [], []
    rng = random.Random(seed)
    for _ in range(resets):
        start = time.perf_counter()
        obs = env.reset(task)
        reset_ms.append(1000 * (time.perf_counter() - start))
        for _ in range(steps):
            action = rng.choice(obs.admissible_actions)
            start = time.perf_counter()
            obs, _, done, _ = env.step(action)
            step_ms.append(1000 * (time.perf_counter() - start))
            if done:
                break
    return reset_ms, step_ms


def _games(config: GeneratorConfig, games_per_type: int, cache: Path) -> list:
    return [generate_game("train", t, i, config, cache) for t in TASK_TYPES
            for i in range(games_per_type)]


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run")
    parser.add_argument("--only-fuzz", action="store_true",
                        help="run only the fuzz part and merge it into the results file")
    args = parser.parse_args()
    name = "alfworld_env.quick.json" if args.quick else "alfworld_env.json"
    if args.only_fuzz:
        fuzz_results(name)  # before the fuzz: the file it merges into is there and whole
    games_per_type = 1 if args.quick else 3
    resets, steps = (2, 10) if args.quick else (4, 25)
    fuzz_count = 1_000 if args.quick else 10_000
    cache = Path(tempfile.mkdtemp(prefix="alfworld-bench-"))
    sizes = {"small": GeneratorConfig(seed=11, max_receptacles=12),
             "large": GeneratorConfig(seed=11, max_receptacles=None)}
    if args.only_fuzz:
        tasks = _games(sizes["small"], games_per_type, cache)
        fuzz_metrics, fuzz_config = fuzz_figures(AlfWorldEnv(), tasks, fuzz_count,
                                                 f"{len(tasks)} small games")
        print(merge_fuzz(name, fuzz_metrics, fuzz_config).read_text())
        return
    metrics: dict[str, float] = {}
    for size, config in sizes.items():
        start = time.perf_counter()
        tasks = _games(config, games_per_type, cache)
        metrics[f"games_generated_per_s_{size}"] = len(tasks) / (time.perf_counter() - start)
        metrics[f"receptacles_mean_{size}"] = statistics.mean(
            t.payload["receptacles"] for t in tasks)
        samples = {True: ([], []), False: ([], [])}
        load_ms = []
        for i, task in enumerate(tasks):
            for memo in (True, False) if i % 2 == 0 else (False, True):
                env = AlfWorldEnv(memoize=memo)
                start = time.perf_counter()
                env.reset(task)
                load_ms.append(1000 * (time.perf_counter() - start))
                r, s = _time_game(env, task, resets, steps, seed=i)
                samples[memo][0].extend(r)
                samples[memo][1].extend(s)
        grammar_memo.enable()
        for memo, label in ((True, ""), (False, "_nomemo")):
            metrics[f"reset_median_ms_{size}{label}"] = statistics.median(samples[memo][0])
            metrics[f"step_median_ms_{size}{label}"] = statistics.median(samples[memo][1])
        metrics[f"step_speedup_ratio_{size}"] = (metrics[f"step_median_ms_{size}_nomemo"]
                                                 / metrics[f"step_median_ms_{size}"])
        metrics[f"load_median_ms_{size}"] = statistics.median(load_ms)
        if size == "small":
            fuzz_metrics, fuzz_config = fuzz_figures(AlfWorldEnv(), tasks, fuzz_count,
                                                     f"{len(tasks)} small games")
    metrics = {**{k: round(v, 3) for k, v in metrics.items()}, **fuzz_metrics}
    path = write_result(
        "alfworld_env",
        config={"games_per_type": games_per_type, "resets_per_game": resets,
                "random_steps_per_reset": steps, "small": vars(sizes["small"]),
                "large": vars(sizes["large"]), "fuzz": fuzz_config},
        metrics=metrics,
        targets={"step_median_ms_small": {"max": 20}, "reset_median_ms_small": {"max": 300},
                 **FUZZ_TARGETS},
        notes=("Generated games (not the official splits). Random admissible actions. "
               "Reset/step medians exclude each game's first load. games_generated_per_s "
               "includes the planner check and replay of every candidate. " + FUZZ_NOTE),
        quick=args.quick)
    print(path.read_text())


if __name__ == "__main__":
    run_script(main)
