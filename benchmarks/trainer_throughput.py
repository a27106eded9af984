"""Trainer throughput on the embedded default: each phase of an RL update beside its floor.

RL updates of the embedded default (``config/presets/embedded.yaml``: GRPO, 4 tasks x 8 rollouts of
up to 30 steps per update) from one SFT start, no evaluation. Each run is a subprocess (a
*worker*) that times, per update:

- ``prefill``: the model forwards that fill the prompts' KV caches (after the prefix the
  prompt cache holds);
- ``generation``: the rest of ``HFPolicy.generate``, the decoding steps with their sampling,
  admissible-trie walk and bookkeeping;
- ``rollout_other``: the rest of the rollout phase (environments, prompts, tries);
- ``scoring``: the loop's ``score`` phase and the ``teacher``/``hindsight`` passes (none in the
  default: GRPO, no KL, sampling log-probs reused);
- ``ppo_forward_backward``: the PPO update's forwards with gradient and their backwards;
- ``optimiser_step``: ``AdamW.step``.

Each phase has its *floor*: the time the same tensor shapes take as bare calls of the same
model back to back, with no Python loop around them (decoding: as many cached one-token
forwards of the same batch and cache lengths; prefill: forwards of the same widths over caches
of the same lengths; PPO: forward and backward of the same ``[b, L]`` batches; optimiser: as
many steps); every ``k``-th recorded call is replayed and scaled, so a floor costs about 200
calls. Figures (medians over updates, then over repeats): ``<phase>_s``, ``<phase>_floor_s``,
``<phase>_over_floor``, ``<phase>_tokens_per_s``, ``update_s`` (wall time of one update),
``outcomes_per_cpu_hour`` (finished rollouts per hour of process CPU time, all threads) and
``outcomes_per_hour`` (per wall hour).

With ``--baseline REV`` the same workers also run on a ``git worktree`` of ``REV`` (checked out
in a temporary folder, its ``src`` first on ``PYTHONPATH``), alternating with the working
tree's (new, old, old, new, ...), and the result adds ``outcomes_per_hour_ratio``,
``outcomes_per_cpu_hour_ratio`` and ``update_s_ratio`` (new over old), ``ppo_tokens_ratio``,
``scoring_tokens_ratio`` and ``sft_epoch_s_ratio`` (old over new) and the old tree's figures as
``<name>.baseline``. Tokens: those the forwards compute (``<phase>_tokens_per_update``), a
prefix read from a cache not counted, so a prefix tree's trunk counts once. SFT: each worker
also times ``--sft-epochs`` of an SFT epoch (default a quarter) over the embedded default's
demonstration samples (built once, by the working tree), from the ``--model`` weights, as
``sft_epoch_s``. ``--hcapo`` adds one worker of the working tree with ``method=hcapo`` and
``hcapo_extra_pass_share_pct``, its hindsight pass as a share of an update, beside
``hcapo_hindsight_row_share``, the share of step rows the pass scored (the rollouts whose
hindsight can change an advantage, ``credit.hcapo.hindsight_rollouts``; the median over updates
of ``score/hindsight_row_share``).

    python benchmarks/trainer_throughput.py --model SFT_DIR [--updates N] [--repeats R]
        [--baseline REV] [--threads N] [--sft-epochs E] [--hcapo] [--quick] [key=value ...]

``--model`` is an SFT start of the embedded default (a run's ``reference/``). ``--quick``: one
update of 2 tasks per worker, written to ``trainer_throughput.quick.json``. ``key=value`` are
config overrides for every worker (``method=hcapo`` measures HCAPO's hindsight pass).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = ("prefill", "generation", "rollout_other", "scoring", "ppo_forward_backward",
          "optimiser_step")
FLOOR_CALLS = 200  # recorded calls replayed per floor; the rest scaled from them
SCORING_PHASES = ("score", "teacher", "hindsight")


# THE WORKER: one run, timed from inside


class PhaseRecorder:
    """Wraps the model's ``forward``, ``Tensor.backward``, ``AdamW.step`` and
    ``HFPolicy.generate`` to time them and record the shapes of every call."""

    def __init__(self, model_class) -> None:
        import torch

        from agentcredit.rollout.policy import HFPolicy

        self.seconds = {"generate": 0.0, "prefill": 0.0, "decode": 0.0, "scoring": 0.0,
                        "ppo_forward_backward": 0.0, "optimiser_step": 0.0}
        self.tokens = dict.fromkeys(self.seconds, 0)
        self.calls: dict[str, list[tuple]] = {"prefill": [], "decode": [], "scoring": [],
                                              "ppo_forward_backward": [], "optimiser_step": []}
        self.model = None
        self.generating = False
        forward, backward = model_class.forward, torch.Tensor.backward
        step, generate = torch.optim.AdamW.step, HFPolicy.generate
        recorder = self

        def timed_forward(module, *args, **kwargs):
            began = time.perf_counter()
            out = forward(module, *args, **kwargs)
            recorder.forward_done(module, kwargs, time.perf_counter() - began)
            return out

        def timed_backward(tensor, *args, **kwargs):
            began = time.perf_counter()
            out = backward(tensor, *args, **kwargs)
            recorder.seconds["ppo_forward_backward"] += time.perf_counter() - began
            return out

        def timed_step(optimizer, *args, **kwargs):
            began = time.perf_counter()
            out = step(optimizer, *args, **kwargs)
            recorder.seconds["optimiser_step"] += time.perf_counter() - began
            recorder.calls["optimiser_step"].append(())
            return out

        def timed_generate(policy, *args, **kwargs):
            began = time.perf_counter()
            recorder.generating = True
            try:
                out = generate(policy, *args, **kwargs)
            finally:
                recorder.generating = False
            recorder.seconds["generate"] += time.perf_counter() - began
            recorder.tokens["generate"] += sum(len(g.token_ids) for g in out)
            return out

        model_class.forward, torch.Tensor.backward = timed_forward, timed_backward
        torch.optim.AdamW.step, HFPolicy.generate = timed_step, timed_generate

    def forward_done(self, model, kwargs: dict, seconds: float) -> None:
        """File one forward under its phase: with gradient PPO (or SFT); inside ``generate``
        decoding (one token per row over a cache, with a mask: the batched decode step) or
        prefill; else scoring. A forward over a cache (a prefix tree's branches) counts the
        tokens it computes, not the cached ones, and is replayed over a cache as long."""
        import torch

        ids, mask = kwargs["input_ids"], kwargs.get("attention_mask")
        batch, width = ids.shape
        kept = kwargs.get("logits_to_keep", 0)  # columns the LM head runs on (0: all)
        kept = kept.numel() if isinstance(kept, torch.Tensor) else int(kept)
        past = kwargs.get("past_key_values")
        past_len = (mask.shape[1] - width if mask is not None
                    else past.get_seq_length() if past is not None else 0)
        tokens = int(mask[:, -width:].sum()) if mask is not None else ids.numel()
        self.model = model
        if torch.is_grad_enabled():
            phase, shape = "ppo_forward_backward", (batch, width, kept, past_len)
        elif self.generating:
            phase = "decode" if width == 1 and mask is not None and past_len else "prefill"
            shape = (batch, width, past_len)
        else:
            phase, shape = "scoring", (batch, width, kept, past_len)
        self.seconds[phase] += seconds
        self.tokens[phase] += tokens
        self.calls[phase].append(shape)

    def floors(self) -> dict[str, float]:
        """Each phase's recorded calls replayed as bare calls of the same shapes (seconds)."""
        import torch
        from transformers import DynamicCache

        model = self.model
        config, device = model.config, next(model.parameters()).device
        heads = config.num_attention_heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        layers = config.num_hidden_layers

        def ids(batch, width):
            return torch.randint(0, config.vocab_size, (batch, width), device=device)

        def cache(batch, past_len):
            return DynamicCache(ddp_cache_data=[
                (torch.randn(batch, kv_heads, past_len, head_dim, device=device),
                 torch.randn(batch, kv_heads, past_len, head_dim, device=device))
                for _ in range(layers)]) if past_len else None

        def cached_forward(batch, width, past_len):
            past = cache(batch, past_len)
            mask = torch.ones(batch, past_len + width, dtype=torch.long, device=device)
            began = time.perf_counter()
            model(input_ids=ids(batch, width), attention_mask=mask, past_key_values=past,
                  use_cache=True, logits_to_keep=1)
            return time.perf_counter() - began

        def scoring(batch, width, kept, past_len=0):
            past = cache(batch, past_len)
            began = time.perf_counter()
            model(input_ids=ids(batch, width), past_key_values=past, use_cache=past is not None,
                  logits_to_keep=kept)
            return time.perf_counter() - began

        def forward_backward(batch, width, kept, past_len=0):
            past = cache(batch, past_len)
            began = time.perf_counter()
            out = model(input_ids=ids(batch, width), past_key_values=past,
                        use_cache=past is not None, logits_to_keep=kept)
            out.logits.float().mean().backward()
            return time.perf_counter() - began

        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-12)

        def step():
            for p in model.parameters():
                p.grad = torch.zeros_like(p)
            began = time.perf_counter()
            optimizer.step()
            return time.perf_counter() - began

        replay = {"prefill": cached_forward, "decode": cached_forward, "scoring": scoring,
                  "ppo_forward_backward": forward_backward, "optimiser_step": step}
        out = {}
        model.eval()
        for phase, calls in self.calls.items():
            every = max(1, len(calls) // FLOOR_CALLS)
            sample = calls[::every]
            with torch.set_grad_enabled(phase == "ppo_forward_backward"), \
                    _uncounted(self):
                seconds = sum(replay[phase](*shape) for shape in sample)
            out[phase] = seconds * len(calls) / len(sample) if sample else 0.0
        return out


class _uncounted:
    """Within the block, the recorder does not count (floors replay through the same wraps)."""

    def __init__(self, recorder: PhaseRecorder) -> None:
        self.recorder, self.saved = recorder, None

    def __enter__(self):
        self.saved = (dict(self.recorder.seconds), dict(self.recorder.tokens),
                      {k: list(v) for k, v in self.recorder.calls.items()})

    def __exit__(self, *exc):
        self.recorder.seconds, self.recorder.tokens, self.recorder.calls = self.saved


def _load_config(overrides: list[str]):
    """The config loader of whichever tree is on the path."""
    try:
        from agentcredit.config import load_config
    except ImportError:
        from agentcredit.train.config import load_config
    return load_config(None, overrides)


def worker_overrides(args, out_dir: Path, extra: tuple[str, ...] = ()) -> list[str]:
    """A worker's run settings (``extra`` after ``args.overrides``): one update more than
    measured, stopped before it (no final evaluation)."""
    return [*args.overrides, *extra, f"model.name={args.model}", "sft.enabled=false",
            f"run.output_dir={out_dir}", "run.name=throughput", "run.progress=false",
            "run.eval_at_start=false", "run.eval_every=0", f"run.updates={args.updates + 1}",
            f"run.checkpoint_every={args.updates + 1}", f"run.threads={args.threads}"]


def worker(args) -> None:
    """One run of ``args.updates`` updates; per-update figures to ``args.worker`` (JSON)."""
    import torch
    import transformers

    from agentcredit.jsonl_log import JsonlLog
    from agentcredit.rollout.collector import RolloutCollector
    from agentcredit.train.loop import train

    architecture = json.loads((Path(args.model) / "config.json").read_text())["architectures"][0]
    recorder = PhaseRecorder(getattr(transformers, architecture))
    # (process CPU s, wall s) where each update starts (its first collection) and ends (its
    # metrics line)
    starts: list[tuple[float, float]] = []
    ends: list[tuple[float, float]] = []
    append, collect = JsonlLog.append, RolloutCollector.collect

    def marked(log, rows, **common):
        if log.path.name == "metrics.jsonl" and len(ends) < len(starts):
            ends.append((time.process_time(), time.perf_counter()))
        return append(log, rows, **common)

    def started(collector, *args, **kwargs):
        if len(starts) == len(ends):
            starts.append((time.process_time(), time.perf_counter()))
        return collect(collector, *args, **kwargs)
    JsonlLog.append, RolloutCollector.collect = marked, started
    config = _load_config(worker_overrides(args, Path(args.worker).parent / "run"))
    per_update = []
    train(config, stop_after_update=args.updates, overwrite=True, echo=lambda _: None)
    records = [json.loads(line) for line in
               (config.run_dir / "metrics.jsonl").read_text().splitlines()]
    updates = [r for r in records if r.get("kind") == "update"]
    for record, start, end in zip(updates, starts, ends, strict=True):
        per_update.append({"record": record, "cpu_s": end[0] - start[0],
                           "wall_s": end[1] - start[1]})
    totals = {"seconds": dict(recorder.seconds), "tokens": dict(recorder.tokens),
              "calls": {k: len(v) for k, v in recorder.calls.items()}}
    floors = recorder.floors()
    Path(args.worker).write_text(json.dumps({
        "updates": per_update, "totals": totals, "floors": floors,
        "sft_epoch_s": sft_epoch_seconds(args, config) if args.sft_epochs else None,
        "threads": torch.get_num_threads()}))


def sft_epoch_seconds(args, config) -> float:
    """Seconds per epoch of the warm start's SFT (``run_sft`` with the run's ``sft.*``) over
    the demonstration samples in ``args.samples``, for ``args.sft_epochs`` epochs, from the
    ``--model`` weights."""
    import dataclasses
    import pickle

    import torch

    from agentcredit.train.model_loading import load_policy
    from agentcredit.train.warm_start.sft import run_sft

    samples = pickle.loads(Path(args.samples).read_bytes())
    model, tokenizer = load_policy(args.model)
    sft = dataclasses.replace(config.sft, epochs=args.sft_epochs)
    stats = run_sft(model, samples, tokenizer.pad_token_id, sft, torch.Generator().manual_seed(0))
    return stats["sft/seconds"] / args.sft_epochs


def sft_samples(args, path: Path) -> int:
    """The embedded default's SFT samples (every train game's demonstrations, as the warm
    start plays them, with the ``--model`` tokenizer) pickled to ``path``; their count."""
    import pickle

    from agentcredit.train.build import collector_config
    from agentcredit.train.model_loading import load_policy
    from agentcredit.train.warm_start.sft import demonstration_steps, expert_demonstrations
    from agentcredit.train.warm_start.start_policy import demonstration_settings

    config = _load_config([*args.overrides, f"model.name={args.model}"])
    suite = config.env.build_suite()
    env = suite.make_env()
    copies, noise, _ = demonstration_settings(config, env)
    demos = expert_demonstrations(env, suite.tasks("train"), copies=copies, noise=noise,
                                  seed=config.run.seed)
    _, tokenizer = load_policy(args.model)
    samples = demonstration_steps(demos, tokenizer, collector_config(config).prompt,
                                  recovery=config.sft.recovery, seed=config.run.seed,
                                  decoding=config.rollout.decoding)
    path.write_bytes(pickle.dumps(samples))
    return sum(len(t.steps) for t in samples)


# THE DRIVER: workers of both trees, interleaved


def summarise(result: dict) -> dict[str, float]:
    """One worker's figures (see the module docstring): per update, medians over updates for
    the loop's phases, totals over the run divided by its updates for the recorded ones."""
    rows = result["updates"]
    n = len(rows)
    times = [{k.removeprefix("time/"): v for k, v in r["record"].items()
              if k.startswith("time/")} for r in rows]
    seconds, tokens = result["totals"]["seconds"], result["totals"]["tokens"]
    floors = result["floors"]
    rollout_s = sum(t["rollout"] for t in times)
    scoring_s = sum(t.get(p, 0.0) for t in times for p in SCORING_PHASES)
    phase_s = {
        "prefill": seconds["prefill"],
        "generation": seconds["generate"] - seconds["prefill"],
        "rollout_other": rollout_s - seconds["generate"],
        "scoring": scoring_s,
        "ppo_forward_backward": seconds["ppo_forward_backward"],
        "optimiser_step": seconds["optimiser_step"],
    }
    phase_floor = {"prefill": floors["prefill"], "generation": floors["decode"],
                   "rollout_other": None, "scoring": floors["scoring"],
                   "ppo_forward_backward": floors["ppo_forward_backward"],
                   "optimiser_step": floors["optimiser_step"]}
    phase_tokens = {"prefill": tokens["prefill"], "generation": tokens["generate"],
                    "scoring": tokens["scoring"],
                    "ppo_forward_backward": tokens["ppo_forward_backward"]}
    out: dict[str, float] = {}
    for phase in PHASES:
        out[f"{phase}_s"] = phase_s[phase] / n
        if phase_floor[phase] is not None:
            out[f"{phase}_floor_s"] = phase_floor[phase] / n
            if phase_floor[phase] > 0:
                out[f"{phase}_over_floor"] = phase_s[phase] / phase_floor[phase]
        if phase_tokens.get(phase) and phase_s[phase] > 0:
            out[f"{phase}_tokens_per_s"] = phase_tokens[phase] / phase_s[phase]
    episodes = [_episodes(r["record"]) for r in rows]
    out["update_s"] = statistics.median(sum(t.values()) for t in times)
    out["rollouts_per_update"] = statistics.median(episodes)
    out["outcomes_per_hour"] = 3600 * sum(episodes) / sum(sum(t.values()) for t in times)
    out["outcomes_per_cpu_hour"] = 3600 * sum(episodes) / sum(r["cpu_s"] for r in rows)
    out["rollout_steps_per_update"] = statistics.median(r["record"]["rollout/steps"]
                                                        for r in rows)
    for phase in {p for t in times for p in t}:
        out[f"loop_{phase}_s"] = statistics.median(t.get(phase, 0.0) for t in times)
    shares = [r["record"]["score/hindsight_row_share"] for r in rows
              if "score/hindsight_row_share" in r["record"]]
    if shares:
        out["hindsight_row_share"] = statistics.median(shares)
    out["ppo_tokens_per_update"] = tokens["ppo_forward_backward"] / n
    out["scoring_tokens_per_update"] = tokens["scoring"] / n
    if result.get("sft_epoch_s"):
        out["sft_epoch_s"] = result["sft_epoch_s"]
    return out


def _episodes(record: dict) -> float:
    """Finished rollouts of one update: its steps over the mean episode length."""
    return round(record["rollout/steps"] / record["rollout/episode_length"])


def checkout(rev: str) -> Path:
    """A ``git worktree`` of ``rev`` in a temporary folder (removed at exit by the caller)."""
    folder = Path(tempfile.mkdtemp(prefix="throughput-baseline-")) / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", str(folder), rev], check=True,
                   capture_output=True)
    return folder


def run_worker(src: Path, args, tag: str, index: int, root: Path) -> dict:
    """One worker on the sources in ``src``; its figures."""
    out = root / f"{tag}_{index}" / "result.json"
    out.parent.mkdir(parents=True)
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", str(out),
               "--model", args.model, "--updates", str(args.updates),
               "--threads", str(args.threads), "--sft-epochs", str(args.sft_epochs),
               "--samples", str(args.samples), *args.overrides]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(src), str(Path(__file__).resolve().parent)])}
    began = time.perf_counter()
    subprocess.run(command, check=True, env=env)
    print(f"{tag} run {index}: {time.perf_counter() - began:.0f} s", flush=True)
    return json.loads(out.read_text())


def worker_arguments() -> argparse.ArgumentParser:
    """A worker's command line, as ``run_worker`` writes it: argparse's own parser, importing
    nothing, since a worker may run a baseline tree whose agentcredit lacks what
    ``bench_common`` imports."""
    parser = argparse.ArgumentParser(description="one worker of trainer_throughput.py")
    parser.add_argument("--worker", required=True, help="the JSON file of its figures")
    parser.add_argument("--model", required=True)
    parser.add_argument("--updates", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--sft-epochs", type=float, required=True)
    parser.add_argument("--samples", required=True)
    parser.add_argument("overrides", nargs="*")
    return parser


def main() -> None:
    from agentcredit.train.build import check_device
    from bench_common import BenchmarkParser, at_least, git_revision, model_folder, number_from

    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, type=model_folder,
                        help="SFT start (a run's reference/)")
    parser.add_argument("--updates", type=at_least(1), default=None,
                        help="updates per worker (3)")
    parser.add_argument("--repeats", type=at_least(1), default=None,
                        help="workers per tree, alternating trees (2)")
    parser.add_argument("--baseline", default=None, type=git_revision,
                        help="git revision to compare against")
    parser.add_argument("--threads", type=at_least(1), default=2,
                        help="torch threads per worker")
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run")
    parser.add_argument("--sft-epochs", type=number_from(0), default=0.25,
                        help="SFT epochs each worker times (0: none)")
    parser.add_argument("--hcapo", action="store_true",
                        help="also one worker of the working tree with method=hcapo")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()
    args.samples = None
    if args.quick:
        args.overrides = ["rollout.tasks_per_update=2", *args.overrides]
    args.updates = args.updates or (1 if args.quick else 3)
    # the workers' runs as the working tree loads them: a bad setting stops here
    for extra in [(), ("method=hcapo",)] if args.hcapo else [()]:
        check_device(_load_config(worker_overrides(args, Path("run"), extra)), training=True)
    repeats = args.repeats or (1 if args.quick else 2)
    here = Path(__file__).resolve().parents[1] / "src"
    baseline = checkout(args.baseline) if args.baseline else None
    root = Path(tempfile.mkdtemp(prefix="trainer-throughput-"))
    results: dict[str, list[dict]] = {"new": [], "old": []}
    sft_steps = 0
    if args.sft_epochs:
        args.samples = root / "sft_samples.pkl"
        sft_steps = sft_samples(args, args.samples)
    try:
        for index in range(repeats):
            order = ("new", "old") if index % 2 == 0 else ("old", "new")
            for tag in order:
                if tag == "old" and baseline is None:
                    continue
                src = here if tag == "new" else baseline / "src"
                results[tag].append(summarise(run_worker(src, args, tag, index, root)))
        if args.hcapo:
            hcapo = argparse.Namespace(**{**vars(args), "sft_epochs": 0.0,
                                          "overrides": [*args.overrides, "method=hcapo"]})
            results["hcapo"] = [summarise(run_worker(here, hcapo, "hcapo", 0, root))]
    finally:
        if baseline is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(baseline)], check=False)
    metrics = _medians(results["new"])
    if results.get("hcapo"):
        (hcapo_figures,) = results["hcapo"]
        metrics["hcapo_extra_pass_share_pct"] = (100 * hcapo_figures["loop_hindsight_s"]
                                                 / hcapo_figures["update_s"])
        metrics["hcapo_update_s"] = hcapo_figures["update_s"]
        metrics["hcapo_hindsight_row_share"] = hcapo_figures["hindsight_row_share"]
    if results["old"]:
        old = _medians(results["old"])
        metrics |= {f"{key}.baseline": value for key, value in old.items()}
        metrics["outcomes_per_hour_ratio"] = (metrics["outcomes_per_hour"]
                                              / old["outcomes_per_hour"])
        metrics["outcomes_per_cpu_hour_ratio"] = (metrics["outcomes_per_cpu_hour"]
                                                  / old["outcomes_per_cpu_hour"])
        metrics["update_s_ratio"] = metrics["update_s"] / old["update_s"]
        metrics["ppo_tokens_ratio"] = (old["ppo_tokens_per_update"]
                                       / metrics["ppo_tokens_per_update"])
        if metrics["scoring_tokens_per_update"]:
            metrics["scoring_tokens_ratio"] = (old["scoring_tokens_per_update"]
                                               / metrics["scoring_tokens_per_update"])
        if "sft_epoch_s" in metrics and "sft_epoch_s" in old:
            metrics["sft_epoch_s_ratio"] = old["sft_epoch_s"] / metrics["sft_epoch_s"]
    metrics = {key: round(value, 4) for key, value in sorted(metrics.items())}
    for key, value in metrics.items():
        print(f"{key}: {value}")
    from bench_common import write_result

    path = write_result(
        "trainer_throughput",
        config={"model": args.model, "updates": args.updates, "repeats": repeats,
                "threads": args.threads, "baseline": args.baseline,
                "sft_epochs": args.sft_epochs, "sft_steps": sft_steps,
                "overrides": args.overrides},
        metrics=metrics, targets={"ppo_tokens_ratio": ">= 3", "outcomes_per_hour_ratio": ">= 1.8",
                                  "sft_epoch_s_ratio": ">= 2",
                                  "hcapo_extra_pass_share_pct": "<= 8.3"},
        notes=("Embedded default (config/presets/embedded.yaml) from one SFT start, no evaluation. "
               "Per phase: seconds per update, the floor (the same shapes as bare calls of "
               "the same model back to back), their ratio and tokens/s; totals over each "
               "worker's updates divided by its updates, then medians over workers. "
               "outcomes = finished rollouts; CPU hours are the worker process's CPU time "
               "(all threads). With a baseline, the trees' workers alternate. "
               "*_tokens_per_update: tokens the PPO forwards (and the scoring passes) compute, "
               "a cached prefix not counted; sft_epoch_s: one SFT epoch over the embedded "
               "default's demonstration samples, timed on --sft-epochs of one, in each worker "
               "after its updates; *_ratio: old over new (outcomes: new over old). "
               "hcapo_extra_pass_share_pct: with --hcapo, HCAPO's hindsight pass as a share of "
               "the median update of one method=hcapo worker of the working tree; "
               "hcapo_hindsight_row_share: the share of its step rows the pass scored (the "
               "rollouts with two steps or more and a non-zero reward, the only ones whose "
               "hindsight can change an HCAPO advantage), median over updates."),
        quick=args.quick)
    print(path)


def _medians(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(row[key] for row in rows if key in row)
            for key in {k for row in rows for k in row}}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:  # run_worker's command (see worker_arguments)
        worker(worker_arguments().parse_args())
    else:
        from bench_common import run_script

        run_script(main)
