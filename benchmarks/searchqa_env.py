"""Search QA environment speed and oracle figures: world generation, BM25 index build, search
and step latency, the expert's and a random agent's exact match.

For each world size (10,000 and 100,000 passages; ``--quick``: 10,000 and 20,000) it
times the seeded world generation and the index build once, draws test questions
(``--quick``: fewer), then takes the median of single searches (each hop's title query
of the expert and each whole question, after a warm-up) and of single ``env.step``
calls over the expert's episodes and one random episode per question (uniform over
the suggested actions,
``SearchQAEnv.admissible_actions``). ``expert_em_pct`` and ``random_em_pct`` are
exact match over those episodes on the largest world; ``random_f1_pct`` the mean F1.

The fuzz part plays 10,000 hostile actions (``--quick``: 1,000) on the embedded
world's test tasks (``tests/envs/fuzz_actions.py``) and records ``fuzz_actions``,
``fuzz_exceptions`` (the target: 0), ``fuzz_inconsistencies`` and ``fuzz_seconds``.

    python benchmarks/searchqa_env.py [--quick]
"""

from __future__ import annotations

import random
import statistics
import time

from agentcredit.envs.searchqa.engine import SearchQAEnv, task_question
from agentcredit.envs.searchqa.options import SearchQAConfig
from agentcredit.envs.searchqa.sources import bm25_index, generated_world
from agentcredit.envs.searchqa.tasks import build_tasks
from bench_common import (
    FUZZ_NOTE,
    FUZZ_TARGETS,
    BenchmarkParser,
    fuzz_figures,
    run_script,
    write_result,
)

SEED = 0


def _label(size: int) -> str:
    return f"{size // 1000}k"


def _episode(env: SearchQAEnv, task, actions) -> tuple[list[float], float, float]:
    """Step times (ms), EM and F1 of one episode; ``actions(obs)`` picks each response."""
    times, obs, done, reward = [], env.reset(task), False, 0.0
    while not done:
        action = actions(obs)
        start = time.perf_counter()
        obs, reward, done, _ = env.step(action)
        times.append(1000 * (time.perf_counter() - start))
    return times, reward, env.f1


def measure(size: int, questions: int) -> tuple[dict[str, float], dict]:
    label = _label(size)
    config = SearchQAConfig(num_passages=size, seed=SEED, train_questions=0, valid_questions=0,
                            test_questions=questions)
    start = time.perf_counter()
    generated_world(size, SEED)
    generation_s = time.perf_counter() - start
    start = time.perf_counter()
    index = bm25_index(config.corpus_spec())
    index_s = time.perf_counter() - start
    tasks = build_tasks("test", config)

    queries = [hop.title for t in tasks for hop in task_question(t).hops]
    queries += [t.instruction for t in tasks]  # whole questions: longer, commoner words
    for q in queries[:10]:
        index.search(q, config.topk)
    search_ms = []
    for q in queries:
        start = time.perf_counter()
        index.search(q, config.topk)
        search_ms.append(1000 * (time.perf_counter() - start))

    env, rng, step_ms = SearchQAEnv(), random.Random(SEED), []
    expert_em, random_em, random_f1 = [], [], []
    for task in tasks:
        plan = iter(env.expert(task))
        times, em, _ = _episode(env, task, lambda obs, plan=plan: next(plan))
        step_ms += times
        expert_em.append(em)
        times, em, f1 = _episode(env, task, lambda obs: rng.choice(obs.admissible_actions))
        step_ms += times
        random_em.append(em)
        random_f1.append(f1)
    metrics = {
        f"world_generation_s_{label}": generation_s,
        f"index_build_s_{label}": index_s,
        f"search_median_ms_{label}": statistics.median(search_ms),
        f"search_p95_ms_{label}": statistics.quantiles(search_ms, n=20)[-1],
        f"step_median_ms_{label}": statistics.median(step_ms),
        f"step_p95_ms_{label}": statistics.quantiles(step_ms, n=20)[-1],
        f"expert_em_pct_{label}": 100.0 * statistics.mean(expert_em),
        f"random_em_pct_{label}": 100.0 * statistics.mean(random_em),
        f"random_f1_pct_{label}": 100.0 * statistics.mean(random_f1),
    }
    return metrics, {"passages": size, "questions_drawn": questions, "questions": len(tasks),
                     "queries": len(queries), "steps_timed": len(step_ms)}


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run")
    args = parser.parse_args()
    sizes = (10_000, 20_000) if args.quick else (10_000, 100_000)
    questions = 100 if args.quick else 500
    metrics, runs = {}, {}
    for size in sizes:
        m, run = measure(size, questions)
        metrics.update(m)
        runs[_label(size)] = run
        print({k: round(v, 3) for k, v in m.items()})
    # after the timings: the fuzz part reuses the cached 10k world and index
    fuzz_metrics, fuzz_config = fuzz_figures(SearchQAEnv(), build_tasks("test", SearchQAConfig()),
                                             1_000 if args.quick else 10_000,
                                             "embedded world, test split")
    big = _label(sizes[-1])
    metrics |= {"expert_em_pct": metrics[f"expert_em_pct_{big}"],
                "random_em_pct": metrics[f"random_em_pct_{big}"]}
    write_result(
        "searchqa_env",
        config={"sizes": list(sizes), "seed": SEED, "questions": questions, "topk": 3,
                "max_turns": 4, "runs": runs, "fuzz": fuzz_config},
        metrics={**metrics, **fuzz_metrics},
        targets={f"search_median_ms_{big}": {"max": 20}, "expert_em_pct": {"min": 100},
                 **FUZZ_TARGETS},
        notes=("Generation and index build are timed once per size (single process, the 2 "
               "cores shared with other work). Search = one BM25 query (bm25s, numpy backend) "
               "and the top-3 ranking; the queries are the expert's titles and the whole "
               "questions. Step times cover the expert's episodes and one random episode per "
               "question, searches included. "
               "The random agent picks uniformly among the suggested actions. " + FUZZ_NOTE),
        quick=args.quick)


if __name__ == "__main__":
    run_script(main)
