"""WebShop environment speed: catalog generation, BM25 index build, search and step latency.

For each catalog size (1,000 and 100,000 products; ``--quick``: 1,000 and
20,000) it times the seeded catalog generation and the index build once, then
the median of single searches (the expert's key-term queries of 200 goals,
after a warm-up) and of single ``env.step`` calls over expert and random
episodes (every page kind, searches included).

The fuzz part plays 10,000 hostile actions (``--quick``: 1,000) on the embedded
shop's test tasks (``tests/envs/fuzz_actions.py``, as the fuzz tests do) and
records ``fuzz_actions``, ``fuzz_exceptions`` (the target: 0),
``fuzz_inconsistencies`` and ``fuzz_seconds``; ``--only-fuzz`` runs only that
part and merges its figures into the existing results file.

    python benchmarks/webshop_env.py [--quick] [--only-fuzz]
"""

from __future__ import annotations

import random
import statistics
import time

from agentcredit.envs.webshop.catalog import generate_catalog
from agentcredit.envs.webshop.engine import WebShopEnv, task_goal
from agentcredit.envs.webshop.expert import key_terms
from agentcredit.envs.webshop.goals import sample_goals
from agentcredit.envs.webshop.options import WebShopConfig
from agentcredit.envs.webshop.shop import open_shop, register_catalog
from agentcredit.envs.webshop.tasks import build_tasks, goal_tasks
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

SEED = 0


def _label(size: int) -> str:
    return f"{size // 1000}k"


def _random_episode(env: WebShopEnv, task, rng: random.Random) -> list[float]:
    times, obs, done = [], env.reset(task), False
    words = task.instruction.replace(",", " ").split()
    while not done:
        actions = list(obs.admissible_actions)
        if actions == ["search[<your query>]"]:
            action = "search[" + " ".join(rng.sample(words, min(4, len(words)))) + "]"
        else:
            action = rng.choice(actions)
        start = time.perf_counter()
        obs, _, done, _ = env.step(action)
        times.append(1000 * (time.perf_counter() - start))
    return times


def measure(size: int, goals: int, episodes: int) -> tuple[dict[str, float], dict]:
    label = _label(size)
    start = time.perf_counter()
    catalog = generate_catalog(size, SEED)
    generation_s = time.perf_counter() - start
    spec = register_catalog(f"bench-{size}", catalog)
    shop = open_shop(spec)
    start = time.perf_counter()
    shop.index  # noqa: B018 - builds the index
    index_s = time.perf_counter() - start

    rng = random.Random(SEED)
    sampled = sample_goals(catalog, 1, SEED)
    tasks = goal_tasks(rng.sample(sampled, goals), "test", spec)
    queries = [key_terms(task_goal(t)) for t in tasks]
    for q in queries[:10]:
        shop.search(q)
    search_ms = []
    for q in queries:
        start = time.perf_counter()
        shop.search(q)
        search_ms.append(1000 * (time.perf_counter() - start))

    env, step_ms, won = WebShopEnv(), [], 0
    for task in tasks[:episodes]:
        env.reset(task)
        for action in env.expert(task):
            start = time.perf_counter()
            _, _, _, info = env.step(action)
            step_ms.append(1000 * (time.perf_counter() - start))
        won += info.won
        step_ms += _random_episode(env, task, rng)
    metrics = {
        f"catalog_generation_s_{label}": generation_s,
        f"index_build_s_{label}": index_s,
        f"search_median_ms_{label}": statistics.median(search_ms),
        f"search_p95_ms_{label}": statistics.quantiles(search_ms, n=20)[-1],
        f"step_median_ms_{label}": statistics.median(step_ms),
        f"step_p95_ms_{label}": statistics.quantiles(step_ms, n=20)[-1],
        f"expert_success_pct_{label}": 100.0 * won / episodes,
    }
    return metrics, {"products": size, "queries": len(queries), "episodes": episodes,
                     "steps_timed": len(step_ms)}


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run")
    parser.add_argument("--only-fuzz", action="store_true",
                        help="run only the fuzz part and merge it into the results file")
    args = parser.parse_args()
    name = "webshop_env.quick.json" if args.quick else "webshop_env.json"
    if args.only_fuzz:
        fuzz_results(name)  # before the fuzz: the file it merges into is there and whole
    fuzz_metrics, fuzz_config = fuzz_figures(WebShopEnv(), build_tasks("test", WebShopConfig()),
                                             1_000 if args.quick else 10_000,
                                             "embedded shop, test split")
    if args.only_fuzz:
        print(merge_fuzz(name, fuzz_metrics, fuzz_config).read_text())
        return
    sizes = (1000, 20_000) if args.quick else (1000, 100_000)
    episodes = 40 if args.quick else 200
    metrics, runs = {}, {}
    for size in sizes:
        m, run = measure(size, goals=200, episodes=episodes)
        metrics.update(m)
        runs[_label(size)] = run
        print({k: round(v, 3) for k, v in m.items()})
    big = _label(sizes[-1])
    write_result(
        "webshop_env",
        config={"sizes": list(sizes), "seed": SEED, "goals": 200, "episodes": episodes,
                "runs": runs, "fuzz": fuzz_config},
        metrics={**metrics, **fuzz_metrics},
        targets={f"step_median_ms_{big}": {"max": 5}, f"search_median_ms_{big}": {"max": 20},
                 **FUZZ_TARGETS},
        notes=("Generation and index build are timed once per size (single process, the 2 "
               "cores shared with other work). Search = one BM25 query (bm25s, numpy backend) "
               "plus ranking of the top 50. Step times cover the expert's episodes and one "
               "random episode per goal, searches included. " + FUZZ_NOTE),
        quick=args.quick)


if __name__ == "__main__":
    run_script(main)
