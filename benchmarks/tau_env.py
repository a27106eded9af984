"""tau environment speed and expert check on the real tau2 data (retail and airline).

For each domain: the median ``reset`` (a fresh copy-on-write database and the
scripted user's opening), the median and 95th-percentile ``step`` over every
task's expert episode and one random episode per task (tool templates, tool
calls with ids from the golden actions, messages, malformed JSON), the share of
tasks the expert wins, and the tasks eligible for it: those whose reward basis
it can satisfy with NL assertions skipped (all of them), and how many of them
had NL assertions to skip.

    python benchmarks/tau_env.py [--quick]
"""

from __future__ import annotations

import json
import random
import statistics
import time

from agentcredit.envs.tau.domains import load_domain
from agentcredit.envs.tau.engine import TauEnv
from agentcredit.envs.tau.reward import golden_actions
from agentcredit.envs.tau.tasks import build_tasks
from bench_common import BenchmarkParser, run_script, write_result

SEED = 0


def _random_action(rng: random.Random, obs, tau_task: dict) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        return rng.choice(obs.admissible_actions)
    if kind == 1 and golden_actions(tau_task):
        action = rng.choice(golden_actions(tau_task))
        return json.dumps({"name": action["name"], "arguments": action["arguments"]})
    if kind == 2:
        return rng.choice(["Could you give me your email address?", "Shall I proceed?",
                           "Let me check that for you."])
    return '{"name": "get_order_details", "arguments": {'


def measure(domain: str, tasks_limit: int, rng: random.Random) -> dict[str, float]:
    env, tasks = TauEnv(domain), build_tasks(domain, "base")[:tasks_limit]
    reset_ms, step_ms, won, skipped_nl = [], [], 0, 0
    for task in tasks:
        tau_task = load_domain(domain).tasks[task.payload["tau_id"]]
        start = time.perf_counter()
        obs = env.reset(task)
        reset_ms.append(1000 * (time.perf_counter() - start))
        for action in env.expert(task):
            start = time.perf_counter()
            obs, _, done, info = env.step(action)
            step_ms.append(1000 * (time.perf_counter() - start))
            if done:
                break
        won += info.won
        skipped_nl += "NL_ASSERTION" in env.last_reward.skipped
        obs, done = env.reset(task), False
        while not done:
            action = _random_action(rng, obs, tau_task)
            start = time.perf_counter()
            obs, _, done, _ = env.step(action)
            step_ms.append(1000 * (time.perf_counter() - start))
    return {f"reset_median_ms.{domain}": statistics.median(reset_ms),
            f"step_median_ms.{domain}": statistics.median(step_ms),
            f"step_p95_ms.{domain}": statistics.quantiles(step_ms, n=20)[-1],
            f"expert_reward_pct.{domain}": 100.0 * won / len(tasks),
            f"tasks_eligible.{domain}": float(len(tasks)),
            f"tasks_nl_skipped.{domain}": float(skipped_nl),
            f"steps_timed.{domain}": float(len(step_ms))}


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run (10 tasks)")
    args = parser.parse_args()
    rng, limit = random.Random(SEED), 10 if args.quick else 10_000
    metrics = {}
    for domain in ("retail", "airline"):
        load_domain(domain)  # reading the packaged files is not a reset
        metrics.update(measure(domain, limit, rng))
    metrics["reset_median_ms"] = max(metrics["reset_median_ms.retail"],
                                     metrics["reset_median_ms.airline"])
    print({k: round(v, 3) for k, v in metrics.items()})
    write_result(
        "tau_env",
        config={"seed": SEED, "tasks": "split base (all)", "user": "scripted",
                "episodes": "per task: the expert's, then one random"},
        metrics=metrics,
        targets={"step_median_ms.retail": {"max": 5}, "step_median_ms.airline": {"max": 5},
                 "expert_reward_pct.retail": {"min": 100}, "expert_reward_pct.airline":
                 {"min": 100}},
        notes=("Single process, on 2 cores shared with other work. A reset builds a "
               "copy-on-write database over the shared one (no copy) and asks the scripted "
               "user for its opening; the first episode of a task also replays its golden "
               "actions once for the reward (cached). NL assertions are skipped (no judge "
               "configured): tasks_nl_skipped counts the eligible tasks that had some."),
        quick=args.quick)


if __name__ == "__main__":
    run_script(main)
