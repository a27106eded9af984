"""Evaluation: success on the validation splits, overall and per task type
(docs/settings.md §6).

One rollout per task at the evaluation temperature (docs/settings.md §6: 0.4), every split
batched into one ``collect`` call. The sampling generator is seeded from the
run seed and the update number only, so an evaluation never consumes the
training random streams, a resumed run evaluates exactly as an
uninterrupted one, and ``agentcredit eval`` of a checkpoint reproduces the
``eval`` line its run logged for that update.

``locate_model`` turns what a user passes to ``eval`` or ``audit`` (a run
directory, a checkpoint folder, ``RUN/reference`` or a model folder) into the
model folder, its update and its run; ``write_eval_result`` writes the result
beside it. Inside a run the result is written only where the run's own folders lead: a
checkpoint folder (or ``checkpoints/``) that is a link, into another run or anywhere, is
refused by name before the evaluation starts and again at the write
(``check_result_folder``), never written through; so is a result name (``eval.json``) that
is a link, a special file or a file with a second hard link, in a run or beside a model
folder (``run/safe_files.output_refusal``).
"""

from __future__ import annotations

import json
import os
import stat
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from agentcredit.config import TrainConfig
from agentcredit.disk_full import writing
from agentcredit.envs.base import Task
from agentcredit.jsonl_log import finite_or_null
from agentcredit.progress import Progress, reporting
from agentcredit.rollout.collector import RolloutCollector
from agentcredit.rollout.records import Trajectory
from agentcredit.run.directory import RunDirectory, RunDirectoryError
from agentcredit.run.safe_files import (
    UnsafeRunFile,
    kind_of,
    output_refusal,
    own_folder,
    write_new,
)
from agentcredit.run.trainer_state import CHECKPOINT_STATE, StateUnreadable, read_trainer_state
from agentcredit.skills.provider import SkillProvider
from agentcredit.train.build import (
    episodes_per_split,
    load_model,
    make_collector,
    validation_tasks,
)
from agentcredit.train.rollout_metrics import env_metric_means


def evaluation_generator(seed: int, update: int) -> torch.Generator:
    """The CPU generator of the evaluation after ``update`` updates."""
    return torch.Generator().manual_seed(seed * 1_000_003 + update + 7919)


def evaluate(
    collector: RolloutCollector,
    tasks_by_split: Mapping[str, Sequence[Task]],
    *,
    temperature: float,
    generator: torch.Generator,
    skills: SkillProvider | None = None,
    episodes_per_game: int | Mapping[str, int] = 1,
) -> dict[str, float | str]:
    """Run ``episodes_per_game`` rollouts per task (``eval.episodes_per_game``; a mapping gives
    each split its own count, ``build.episodes_per_split``) and summarise.

    ``skills`` puts each task's skill in its prompts (``eval.skills``: the ``skill_prompt``
    and ``skill_grpo*`` baselines); ``None``, the default, evaluates without skills.

    Returns (``s`` a split, ``k`` a task type): ``eval/success`` (over all
    evaluated episodes), ``eval/{s}/success``, ``eval/{s}/success/{k}``,
    ``eval/{s}/invalid_rate``, ``eval/{s}/episode_length``, ``eval/{s}/env/{name}``
    (``env_metric_means``), ``eval/{s}/episodes_per_game``, ``eval/episodes_per_game`` when
    every split has the same count, and ``eval/{s}/won``: each
    task's episodes won, in the split's task order, as a string of digits (``"0110"``:
    tasks 1 and 2 won; with two episodes per game ``"0120"``: task 1 won one of its two,
    task 2 both), so two evaluations of the same tasks can be compared game by game (the
    learning benchmark's bootstrap) while ``metrics.jsonl`` stays one short, strict-JSON
    line per evaluation. Every other figure is a mean over episodes.

    Splits with different counts are collected one count at a time, in the order of their
    first split; with one count every task is collected in one call.

    Progress (inside ``progress.reporting(True)``): an ``eval`` bar of finished games (of
    finished episodes when there are several per game).
    """
    counts = ({split: episodes_per_game for split in tasks_by_split}
              if isinstance(episodes_per_game, int) else dict(episodes_per_game))
    for split, count in counts.items():
        if not 1 <= count <= 9:
            raise ValueError(f"episodes_per_game = {count} for {split}: use 1 to 9 (each game's "
                             "wins are one digit of eval/<split>/won)")
    order = [(split, task) for split, tasks in tasks_by_split.items() for task in tasks]
    unit = "games" if set(counts.values()) == {1} else "episodes"
    played: dict[str, list[Trajectory]] = {}
    with Progress("eval", sum(counts[split] for split, _ in order), unit=unit,
                  delay_s=0) as bar:
        for count in dict.fromkeys(counts[split] for split in tasks_by_split):
            splits = [split for split in tasks_by_split if counts[split] == count]
            trajectories = collector.collect(
                [task for split in splits for task in tasks_by_split[split]], count,
                temperature=temperature, generator=generator, skills=skills,
                on_step=bar.update)
            for split in splits:
                size = len(tasks_by_split[split]) * count
                played[split], trajectories = trajectories[:size], trajectories[size:]
    uniform = ({"eval/episodes_per_game": float(next(iter(counts.values())))}
               if len(set(counts.values())) == 1 else {})
    return {**outcome_metrics([split for split, _ in order],
                              [t for split in tasks_by_split for t in played[split]], counts),
            **uniform}


def outcome_metrics(splits: Sequence[str], trajectories: Sequence[Trajectory],
                    episodes_per_game: int | Mapping[str, int] = 1) -> dict[str, float | str]:
    """``evaluate``'s metrics of ``episodes_per_game`` finished trajectories per task (one
    count, or one per split): task ``n`` of split ``splits[n]`` has the next that many
    trajectories, in each split's task order (the ReAct and Reflexion modes of
    ``train/evaluation/eval_modes.py`` summarise their episodes with it too)."""
    counts = ({split: episodes_per_game for split in splits}
              if isinstance(episodes_per_game, int) else episodes_per_game)
    if len(trajectories) != sum(counts[split] for split in splits):
        raise ValueError(f"{len(trajectories)} trajectories for {len(splits)} tasks at "
                         f"{episodes_per_game} episodes per game")
    by_split: dict[str, list[Trajectory]] = defaultdict(list)
    position = 0
    for split in splits:
        by_split[split] += trajectories[position:position + counts[split]]
        position += counts[split]
    metrics = {"eval/success": _mean([t.won for t in trajectories])}
    for split, trajs in by_split.items():
        count = counts[split]
        metrics[f"eval/{split}/success"] = _mean([t.won for t in trajs])
        metrics[f"eval/{split}/invalid_rate"] = (sum(t.num_invalid for t in trajs)
                                                 / max(1, sum(len(t.steps) for t in trajs)))
        metrics[f"eval/{split}/episode_length"] = _mean([len(t.steps) for t in trajs])
        metrics[f"eval/{split}/episodes_per_game"] = float(count)
        metrics[f"eval/{split}/won"] = "".join(
            str(sum(t.won for t in trajs[g:g + count])) for g in range(0, len(trajs), count))
        metrics.update(env_metric_means(trajs, f"eval/{split}/env/"))
        by_type: dict[str, list[bool]] = defaultdict(list)
        for t in trajs:
            by_type[t.task.task_type].append(t.won)
        for task_type in sorted(by_type):
            metrics[f"eval/{split}/success/{task_type}"] = _mean(by_type[task_type])
    return metrics


def _mean(values: Sequence[float]) -> float:
    return float(sum(values)) / len(values) if values else 0.0


def evaluate_model(config: TrainConfig, model_dir: Path, update: int = 0
                   ) -> dict[str, float | str]:
    """Evaluate the model in ``model_dir`` on ``config``'s validation splits.

    Uses the run's rollout options (prompt format, step limit), the evaluation
    temperature, ``eval.skills`` and the generator the run itself uses for the
    evaluation after ``update`` updates. Shows progress bars (game generation, ``eval``)
    on stderr unless ``run.progress`` is false.
    """
    from agentcredit.train.warm_start.skill_texts import check_skill_texts

    if config.run.threads:
        torch.set_num_threads(config.run.threads)
    model, tokenizer = load_model(config, model_dir)
    suite = config.env.build_suite()
    collector = make_collector(config, model, tokenizer, suite)
    with reporting(config.run.progress):
        tasks = validation_tasks(config, suite)
        skills = None
        if config.eval.skills:
            skills = SkillProvider(config.skills.root or None)
            check_skill_texts(skills, [task for split in tasks.values() for task in split])
        return evaluate(collector, tasks, temperature=config.eval.temperature,
                        generator=evaluation_generator(config.run.seed, update), skills=skills,
                        episodes_per_game=episodes_per_split(config, tasks))


# WHICH MODEL


@dataclass(frozen=True)
class ModelSource:
    """The model ``eval`` or ``audit`` runs, found from the path the user gave.

    Attributes:
        model_dir: the folder with ``config.json`` and the weights.
        update: the RL updates the policy has had (``reference/`` = 0); ``None`` for a
            model folder outside a run (it is evaluated with the generator of update 0).
        run_dir: the run the model belongs to (its ``config.yaml`` applies), or ``None``.
        result: where ``eval`` writes its JSON: ``eval.json`` in a checkpoint folder, else
            ``eval_<name>.json`` beside the model folder.
    """

    model_dir: Path
    update: int | None
    run_dir: Path | None
    result: Path

    @property
    def run_config(self) -> Path | None:
        """The run's ``config.yaml``, or ``None`` outside a run."""
        return self.run_dir / "config.yaml" if self.run_dir is not None else None

    def describe(self) -> str:
        """``model folder X, update N`` (what the user should know was evaluated)."""
        if self.update is None:
            return f"model folder {self.model_dir} (outside a run; seeded as update 0)"
        start = " (the RL start)" if self.model_dir.name == "reference" else ""
        return f"model folder {self.model_dir}, update {self.update}{start}"


def locate_model(path: str | Path) -> ModelSource:
    """The model at ``path``: a run directory (its newest checkpoint, else its ``reference/``),
    a checkpoint folder ``RUN/checkpoints/update_NNNNN`` (or its ``policy/``),
    ``RUN/reference`` or a model folder holding ``config.json``.

    Raises:
        FileNotFoundError: ``path`` does not exist, is not a folder (a FIFO or a device is
            named, never opened) or holds no model (one line, what to pass).
        RunDirectoryError: a checkpoint whose trainer state cannot be read.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; pass a run directory, a checkpoint "
                                "folder or a model folder")
    if not path.is_dir():  # a FIFO or a device is never opened, so never waited on or read
        mode = path.stat().st_mode
        what = "a file" if stat.S_ISREG(mode) else kind_of(mode)
        link = f" (through the link to {os.readlink(path)})" if path.is_symlink() else ""
        raise FileNotFoundError(f"{path} is {what}{link}, not a folder: pass a run directory, "
                                "a checkpoint folder or a model folder")
    if path.name == "policy" and (path.parent / CHECKPOINT_STATE).is_file():
        path = path.parent  # a checkpoint's policy/: the checkpoint
    if (path / CHECKPOINT_STATE).is_file():
        return _checkpoint_source(path, _run_of(path.parent.parent))
    if (path / "config.yaml").is_file():  # a run directory
        run = RunDirectory(path)
        latest = run.latest_checkpoint()
        if latest is not None:
            return _checkpoint_source(latest, path)
        if (run.reference / "config.json").is_file():
            return ModelSource(run.reference, 0, path, path / "eval_reference.json")
        raise FileNotFoundError(f"run directory {path} has no checkpoint and no reference/ "
                                "yet, so there is no model to use; train it first")
    if (path / "config.json").is_file():
        run_dir = _run_of(path.parent) if path.name == "reference" else None
        return ModelSource(path, None if run_dir is None else 0, run_dir,
                           path.parent / f"eval_{path.name}.json")
    raise FileNotFoundError(f"{path} is not a model: pass a run directory, a checkpoint folder "
                            "(RUN/checkpoints/update_NNNNN), RUN/reference or a model folder "
                            "with config.json")


def _run_of(folder: Path) -> Path | None:
    return folder if (folder / "config.yaml").is_file() else None


def _checkpoint_source(checkpoint: Path, run_dir: Path | None) -> ModelSource:
    """A checkpoint folder's policy and update (read from its trainer state)."""
    if not (checkpoint / "policy" / "config.json").is_file():
        raise FileNotFoundError(f"checkpoint {checkpoint} has no policy/ model; pass another "
                                "checkpoint folder")
    try:
        update = int(read_trainer_state(checkpoint, tensors=False)["update"])
    except (StateUnreadable, KeyError, TypeError, ValueError) as err:
        raise RunDirectoryError(f"checkpoint {checkpoint}: {err}; pass an earlier checkpoint "
                                "folder") from None
    return ModelSource(checkpoint / "policy", update, run_dir, checkpoint / "eval.json")


def check_result_folder(source: ModelSource) -> None:
    """Refuse to write ``source.result`` through a link: inside a run, every folder from the
    run's folder down to the one the result goes in (``checkpoints/``, ``update_NNNNN/``)
    must be a folder of the run, not a link (``own_folder``, as for a run's own writes).
    Outside a run the folder is the one the user named. In both, the result's own name must
    not be a link, a special file or a file with another hard link (``output_refusal``).

    Raises:
        UnsafeRunFile: one of those folders, or the result's name, is refused (named).
    """
    if source.run_dir is not None and source.result.parent.is_relative_to(source.run_dir):
        folder = source.run_dir
        for part in source.result.parent.relative_to(source.run_dir).parts:
            folder = own_folder(folder / part)
    why = output_refusal(source.result)
    if why:
        raise UnsafeRunFile(why)


def write_eval_result(source: ModelSource, metrics: Mapping[str, float],
                      **fields: object) -> Path:
    """Write ``metrics`` (with the model folder, the update and ``fields``) as strict JSON to
    ``source.result``, atomically; non-finite numbers become ``null``. Returns the path.

    Raises:
        UnsafeRunFile: the result would be written through a link (``check_result_folder``),
            or its temporary name is a link or special file.
    """
    check_result_folder(source)
    record = finite_or_null({"model": str(source.model_dir), "update": source.update,
                             **fields, **metrics})
    tmp = source.result.with_name(source.result.name + ".tmp")
    with writing(source.result):  # the temporary name is created, never followed
        write_new(source.result, (json.dumps(record, indent=1, allow_nan=False) + "\n").encode(),
                  tmp)
    return source.result
