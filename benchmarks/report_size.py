"""Size and speed of ``agentcredit report`` on a 3-seed × 8-method benchmark directory (issue 19).

No real 3 × 8 output directory of ``learning_alfworld.py`` is kept (its runs live in a
temporary folder), so this builds a synthetic one with the project's own writers and
records: one ``METHOD_seedN`` run per method of ``learning_alfworld.DEFAULT_METHODS`` and
seed, each with its ``config.yaml`` (``load_config`` of the method), ``metrics.jsonl``
and ``ledger.jsonl`` (``JsonlLog``) and, as ``run.save_rollouts=1`` with the default
``run.keep_rollouts`` leaves them, its newest saved updates (``save_rollouts``). Each
update's rollouts are played in a small corridor world at the embedded default's size
(4 tasks × 8 rollouts, up to 20 steps, ALFWorld-length observations) and credited by the
method's real estimator: VICT on real verifier traces (``VerifierTracer``), ADRS and
SDAR on teacher log-probs, so diagnostics, ledger rows and token scores have their real
shape. Losses, timings and evaluation numbers are random.

It then times ``write_report`` over the folder (default viewer budget) and records the
page's size against the issue's targets (30 s, 20 MB).

    python benchmarks/report_size.py [--updates 20] [--keep DIR]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import torch

from agentcredit.config import estimator_config, load_config, save_config
from agentcredit.credit import TokenScores, get_estimator
from agentcredit.envs.base import Task
from agentcredit.jsonl_log import JsonlLog, finite_or_null
from agentcredit.report.page import write_report
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.run.saved_rollouts import save_rollouts
from agentcredit.train.rollout_metrics import rollout_metrics
from agentcredit.train.scoring.verifier_traces import VerifierTracer
from agentcredit.train.step_tensors import credit_batch
from agentcredit.verifier.atoms import Verifier
from bench_common import BenchmarkParser, at_least, method_overrides, run_script, write_result
from learning_alfworld import DEFAULT_METHODS

# the corridor's verifier lives with the tests' FakeEnv, which shares it
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corridor import corridor_verifier

SEEDS = (0, 1, 2)
TASKS, GROUP, MAX_STEPS, ROOMS = 4, 8, 20, 8
TYPES = ("pick", "clean", "heat", "cool", "look", "pick2")
SPLITS = ("valid_seen", "valid_unseen")
GAMES_PER_SPLIT = 54  # the embedded default: 9 games per task type
FILLER = ("Looking quickly around you, you see a cabinet 1, a cabinet 2, a countertop 1, a "
          "drawer 1, a fridge 1, a garbagecan 1, a microwave 1, a shelf 1, a sinkbasin 1, "
          "a stoveburner 1, and a toaster 1.")
WORDS = ["go", " left", " right", " take", " apple", " to", " countertop", " 1", "<|im_end|>"]


class Corridor:
    """Rooms ``0..ROOMS-1``; the apple lies in ``task.payload["apple"]``; the environment
    protocol's ``verifier`` is all the tracer needs."""

    def verifier(self, task: Task) -> Verifier:
        return corridor_verifier(task)


def play(task: Task, group_id: int, rng: random.Random) -> Trajectory:
    """A random walk in the corridor with the step records a collector writes."""
    room, won, steps = task.payload["start"], False, []
    start = {"room": room, "won": False}
    for _ in range(MAX_STEPS):
        seen = "You see an apple." if room == task.payload["apple"] else "The room is empty."
        observation = f"You are in room {room}. {seen} {FILLER}"
        action = rng.choice(["go left", "go right", "take apple"])
        valid = (action != "go left" or room > 0) and (action != "go right" or room < ROOMS - 1)
        if valid and action == "take apple":
            valid = won = room == task.payload["apple"]
        elif valid:
            room += 1 if action == "go right" else -1
        ids = [rng.randrange(len(WORDS)) for _ in range(rng.randint(3, 8))]
        steps.append(Step(observation=observation, response=action, action=action, valid=valid,
                          reward=0.0 if valid else -0.1, anchor_key=observation,
                          snapshot={"room": room, "won": won}, prompt_ids=[0], response_ids=ids,
                          sampling_logprobs=[-rng.random() for _ in ids]))
        if won:
            break
    steps[-1].reward += 10.0 * won
    final = "You take the apple." if won else f"You are in room {room}."
    return Trajectory(task=task, group_id=group_id, steps=steps, won=won,
                      outcome_reward=10.0 * won, truncated=not won, initial_snapshot=start,
                      final_observation=final)


class Words:
    """A tokenizer's ``batch_decode`` over ``WORDS``."""

    def batch_decode(self, ids, skip_special_tokens=False):
        return ["".join(WORDS[i] for i in seq) for seq in ids]


def write_run(root: Path, method: str, seed: int, updates: int, keep: int) -> None:
    """One synthetic run of ``method`` (see the module docstring)."""
    name = f"{method.replace('/', '-')}_seed{seed}"
    config = load_config(None, [*method_overrides(method), f"run.name={name}",
                                f"run.output_dir={root}", f"run.seed={seed}",
                                f"run.updates={updates}", "run.save_rollouts=1",
                                f"run.keep_rollouts={keep}"])
    run = config.run_dir
    run.mkdir(parents=True)
    save_config(config, run / "config.yaml")
    estimator, options = get_estimator(config.credit.estimator), estimator_config(config.credit)
    tracer = VerifierTracer(Corridor) if "traces" in config.inputs else None
    rng = random.Random(f"{method}/{seed}")
    level = rng.uniform(0.1, 0.4)
    with JsonlLog(run / "metrics.jsonl") as metrics, JsonlLog(run / "ledger.jsonl") as ledger:
        for update in range(1, updates + 1):
            tasks = [Task(f"train-{rng.randrange(240)}", "corridor", "train", "take the apple",
                          rng.choice(TYPES), {"start": rng.randrange(ROOMS),
                                              "apple": rng.randrange(ROOMS)})
                     for _ in range(TASKS)]
            trajectories = [play(task, (update - 1) * TASKS + g, rng)
                            for g, task in enumerate(tasks) for _ in range(GROUP)]
            batch = credit_batch(trajectories, tracer.trace(trajectories) if tracer else None)
            if "teacher" in config.inputs:
                count = sum(len(s.response_ids) for t in trajectories for s in t.steps)
                steps = torch.repeat_interleave(torch.arange(batch.num_steps), torch.tensor(
                    [len(s.response_ids) for t in trajectories for s in t.steps]))
                batch = type(batch)(**{**batch.__dict__, "tokens": TokenScores(
                    steps, -torch.rand(count), -torch.rand(count), -torch.rand(count), update)})
            credit = estimator(batch, options)
            ledger.append(credit.ledger_rows, update=update)
            if update > updates - keep:
                save_rollouts(run / "rollouts", update, config.credit.estimator, trajectories,
                              batch, credit, Words(), keep)
            metrics.append([finite_or_null({
                "kind": "update", "update": update, **rollout_metrics(trajectories),
                **{f"ppo/{k}": rng.random() for k in ("pg_loss", "kl", "clip_frac",
                                                       "approx_kl", "entropy", "grad_norm")},
                **{f"credit/{k}": v for k, v in credit.diagnostics.items()},
                **{f"time/{p}": rng.uniform(0.5, 20) for p in ("rollout", "score", "credit",
                                                               "update")}})])
            if update % max(1, updates // 4) == 0:
                level = min(1.0, max(0.0, level + rng.gauss(0.02, 0.05)))
                record = {"kind": "eval", "update": update, "eval/success": level,
                          "time/eval": rng.uniform(30, 60)}
                for split in SPLITS:
                    won = "".join(str(int(rng.random() < level)) for _ in range(GAMES_PER_SPLIT))
                    record.update({f"eval/{split}/success": won.count("1") / len(won),
                                   f"eval/{split}/won": won,
                                   f"eval/{split}/invalid_rate": rng.random() / 4,
                                   f"eval/{split}/episode_length": rng.uniform(8, 20)})
                    record.update({f"eval/{split}/success/{t}": rng.random() * level * 2
                                   for t in TYPES})
                metrics.append([record])


def empty_folder(text: str) -> str:
    """``--keep``: a folder that does not exist yet or is empty (the runs are made in it)."""
    folder = Path(text)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise argparse.ArgumentTypeError(f"{text!r} exists and is not an empty folder; name a "
                                         "new one for the runs")
    return text


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=at_least(1), default=20,
                        help="updates per run (learning_alfworld.py's full setting: 20)")
    parser.add_argument("--keep", default=None, type=empty_folder,
                        help="build the runs here and keep them (a new or empty folder)")
    args = parser.parse_args()
    keep = load_config(None).run.keep_rollouts
    root = Path(args.keep or tempfile.mkdtemp(prefix="report-size-"))
    methods = DEFAULT_METHODS.split(",")
    began = time.perf_counter()
    for seed in SEEDS:
        for method in methods:
            write_run(root, method, seed, args.updates, keep)
    built = time.perf_counter() - began
    on_disk = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    result = write_report([root], root / "report.html")
    path = write_result(
        "report_size",
        config={"methods": methods, "seeds": list(SEEDS), "updates": args.updates,
                "saved_updates_per_run": min(keep, args.updates),
                "rollouts_per_update": TASKS * GROUP, "viewer_mb": 8.0},
        metrics={"report_s": round(result.seconds, 2),
                 "report_mb": round(result.size_bytes / 1e6, 2),
                 "runs": result.runs, "problems": len(result.problems),
                 "runs_on_disk_mb": round(on_disk / 1e6, 1), "build_s": round(built, 1)},
        targets={"report_s": "< 30", "report_mb": "< 20"},
        notes="Synthetic benchmark directory (no real 3 x 8 one is kept): real writers, real "
              "estimators on rollouts of a small corridor world at the embedded default's batch "
              "size; random losses, timings and evaluation numbers. report_s is write_report's "
              "wall time (reading every run, drawing, writing); report_mb the page's size.",
        quick=False)
    print(f"{result.runs} runs: report {result.seconds:.1f} s, {result.size_bytes / 1e6:.1f} MB "
          f"({path})")


if __name__ == "__main__":
    run_script(main)
