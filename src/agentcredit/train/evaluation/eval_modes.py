"""Inference-only evaluation modes, the VICT paper's prompting rows: ReAct and Reflexion
(``agentcredit eval --mode react|reflexion``).

- **ReAct** (Yao et al. 2023): the agent reasons before each action. Responses
  use the ``tagged`` format (``<think>…</think>`` then ``<action>…</action>``) with
  free decoding (an admissible-command trie cannot hold free reasoning), and the
  task line asks for the reasoning first (``REACT_CUE``). One episode per task.
- **Reflexion** (Shinn et al. 2023): a ReAct agent plays up to ``trials`` (10)
  trials per task. After a failed trial the same model writes a reflection on it
  (what went wrong, a plan); the last ``memory`` (3) reflections are shown in the
  next trial's prompt. As in the Reflexion code's ALFWorld runs, a trial ends as
  soon as the agent sends the same action twice in a row (``stop_at_repeat``). A
  task counts as solved when any trial solves it.

[choice] Reflections and the ReAct cue go into the task line of the ordinary prompt
(``rollout.prompts``), so both modes see the run's prompt layout, history window and
budget; earlier steps' reasoning is not replayed in the history (the prompt keeps
actions only, as in training).
[choice] A trial is played by the rollout collector to its end and cut at the first
repeated action afterwards; the outcome is the one stopping at the repeat would give
(a repeat that itself wins counts as a win, as in the Reflexion code), at the cost of
the steps after it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal, get_args

from agentcredit.config import ConfigError, TrainConfig, validate
from agentcredit.envs.base import Task
from agentcredit.progress import reporting
from agentcredit.rollout.records import Step, Trajectory

if TYPE_CHECKING:  # the modes play with torch; their names load without it (``--help``)
    import torch

    from agentcredit.rollout.collector import RolloutCollector

EvalMode = Literal["standard", "react", "reflexion"]
#: every ``eval --mode`` (the CLI's choices)
EVAL_MODES: tuple[str, ...] = get_args(EvalMode)

REACT_CUE = ("Before each action, reason about what you have seen and what to do next inside "
             "<think> </think>, then give the action inside <action> </action>.")
REFLECTION_SYSTEM = ("You are an agent reflecting on a failed attempt at a task in a text-based "
                     "environment.")
REFLECTION_ASK = ("You did not complete the task. In a few sentences, say what went wrong and "
                  "write a plan for your next attempt.")


@dataclass(frozen=True)
class ReflexionConfig:
    """Options of the Reflexion mode (Shinn et al. 2023; defaults from its ALFWorld runs).

    Attributes:
        trials: trials per task, 1 to 100 (10).
        memory: reflections kept in the prompt, the most recent ones, 1 to 100 (3).
        stop_on_repeat: a trial ends when the agent sends the same action twice in a row.
        reflection_tokens: token limit of one reflection, 1 to 131,072 (256).
    """

    _limits: ClassVar[dict[str, tuple]] = {"trials": (1, 100), "memory": (1, 100),
                                           "reflection_tokens": (1, 1 << 17)}

    trials: int = 10
    memory: int = 3
    stop_on_repeat: bool = True
    reflection_tokens: int = 256

    def __post_init__(self) -> None:
        validate(self)


def prompting_config(config: TrainConfig) -> TrainConfig:
    """``config`` with the tagged action format and free decoding both modes need."""
    return dataclasses.replace(config, rollout=dataclasses.replace(
        config.rollout, action_format="tagged", decoding="free"))


def acting_task(task: Task, reflections: Sequence[str] = ()) -> Task:
    """``task`` whose instruction carries ``REACT_CUE`` and, numbered, ``reflections``."""
    lines = [task.instruction, REACT_CUE]
    if reflections:
        lines.append("Your reflections on earlier failed attempts:")
        lines += [f"Attempt {n}: {text}" for n, text in enumerate(reflections, 1)]
    return dataclasses.replace(task, instruction="\n".join(lines))


def sent_action(step: Step) -> str:
    """The action text a step sent to the environment (the parsed action, else the response)."""
    return step.response.strip() if step.action is None else step.action


def stop_at_repeat(trajectory: Trajectory) -> Trajectory:
    """The trial as it would have ended at the first action that repeats the one before it.

    Unchanged when no action repeats, or when the first repeat is the last step (its
    outcome stands). Otherwise the steps up to the repeat, not won, not truncated.
    """
    actions = [sent_action(step) for step in trajectory.steps]
    for t in range(1, len(actions) - 1):
        if actions[t] == actions[t - 1]:
            return dataclasses.replace(trajectory, steps=trajectory.steps[:t + 1], won=False,
                                       outcome_reward=0.0, truncated=False,
                                       final_observation="")
    return trajectory


def transcript(trajectory: Trajectory) -> list[str]:
    """The trial as ``Observation:`` / ``Action:`` lines, in order."""
    lines = []
    for step in trajectory.steps:
        lines += [f"Observation: {' '.join(step.observation.split())}",
                  f"Action: {sent_action(step)}"]
    return lines


def reflection_prompt(tokenizer, instruction: str, trajectory: Trajectory,
                      max_tokens: int) -> list[int]:
    """Token ids of the request for a reflection on a failed trial: the task, the trial's
    transcript (oldest lines dropped until it fits ``max_tokens``) and ``REFLECTION_ASK``."""
    lines = transcript(trajectory)
    while True:
        user = "\n".join([f"Your task was to: {instruction}", "Your attempt:", *lines,
                          REFLECTION_ASK])
        ids = tokenizer.apply_chat_template(
            [{"role": "system", "content": REFLECTION_SYSTEM}, {"role": "user", "content": user}],
            add_generation_prompt=True, tokenize=True, return_dict=False)
        if len(ids) <= max_tokens or not lines:
            return list(ids)
        lines = lines[2:]


def react(collector: RolloutCollector, tasks_by_split: Mapping[str, Sequence[Task]], *,
          temperature: float, generator: torch.Generator) -> dict[str, float | str]:
    """One ReAct episode per task; ``evaluate``'s metrics (``evaluate.outcome_metrics``).

    ``collector`` must use the tagged format and free decoding (``prompting_config``).
    """
    from agentcredit.train.evaluation.evaluate import outcome_metrics

    order = [(split, task) for split, tasks in tasks_by_split.items() for task in tasks]
    trajectories = collector.collect([acting_task(task) for _, task in order], 1,
                                     temperature=temperature, generator=generator)
    return outcome_metrics([split for split, _ in order], trajectories)


def reflexion(collector: RolloutCollector, tasks_by_split: Mapping[str, Sequence[Task]], *,
              temperature: float, generator: torch.Generator, config: ReflexionConfig,
              max_prompt_tokens: int) -> dict[str, float | str]:
    """Reflexion trials (see the module docstring); ``evaluate``'s metrics of each task's final
    trial (its first won trial, else its last) plus ``eval/reflexion/success_after_trial_{k}``
    (cumulative), ``eval/reflexion/trials_mean`` and ``eval/reflexion/repeat_stop_share``
    (the share of trials the repeat rule ended).

    ``collector`` must use the tagged format and free decoding (``prompting_config``);
    ``collector.policy`` also writes the reflections.
    """
    from agentcredit.train.evaluation.evaluate import outcome_metrics

    order = [(split, task) for split, tasks in tasks_by_split.items() for task in tasks]
    memories: list[list[str]] = [[] for _ in order]
    final: list[Trajectory | None] = [None] * len(order)
    trials_run = [0] * len(order)
    solved_after, stops, played = [], 0, 0
    policy = collector.policy
    for _ in range(config.trials):
        open_tasks = [n for n, trajectory in enumerate(final)
                      if trajectory is None or not trajectory.won]
        if not open_tasks:
            break
        acting = [acting_task(order[n][1], memories[n][-config.memory:]) for n in open_tasks]
        played_now = collector.collect(acting, 1, temperature=temperature, generator=generator)
        failed = []
        for n, trajectory in zip(open_tasks, played_now, strict=True):
            ended = stop_at_repeat(trajectory) if config.stop_on_repeat else trajectory
            stops += len(ended.steps) < len(trajectory.steps)
            final[n] = dataclasses.replace(ended, task=order[n][1])
            trials_run[n] += 1
            if not ended.won:
                failed.append(n)
        played += len(open_tasks)
        solved_after.append(sum(t is not None and t.won for t in final) / len(order))
        if failed:  # REFLECT on every failed trial, in one batched call
            prompts = [reflection_prompt(policy.tokenizer, order[n][1].instruction, final[n],
                                         max_prompt_tokens) for n in failed]
            replies = policy.generate(prompts, temperature=temperature,
                                      max_new_tokens=config.reflection_tokens,
                                      generator=generator)
            for n, reply in zip(failed, replies, strict=True):
                memories[n].append(" ".join(reply.text.split()))
    solved_after += [solved_after[-1]] * (config.trials - len(solved_after))
    metrics = outcome_metrics([split for split, _ in order], final)
    metrics.update({f"eval/reflexion/success_after_trial_{k}": rate
                    for k, rate in enumerate(solved_after, 1)})
    metrics["eval/reflexion/trials_mean"] = sum(trials_run) / len(order)
    metrics["eval/reflexion/repeat_stop_share"] = stops / max(1, played)
    return metrics


def evaluate_model_mode(config: TrainConfig, model_dir: Path, update: int, mode: EvalMode,
                        reflexion_config: ReflexionConfig | None = None
                        ) -> dict[str, float | str]:
    """``evaluate_model`` in ``mode`` (``react`` or ``reflexion``): the model in ``model_dir`` on
    ``config``'s validation splits, with the generator of the evaluation after ``update``."""
    import torch

    from agentcredit.train.build import load_model, make_collector, validation_tasks
    from agentcredit.train.evaluation.evaluate import evaluation_generator

    if mode not in ("react", "reflexion"):
        raise ValueError(f"evaluation mode {mode!r} is not a prompting mode; choose react or "
                         "reflexion (standard is train.evaluation.evaluate.evaluate_model)")
    if config.eval.episodes_per_game != 1:
        raise ConfigError(f"eval.episodes_per_game = {config.eval.episodes_per_game}: the {mode} "
                         "mode plays one episode per game; set eval.episodes_per_game=1")
    config = prompting_config(config)
    if config.run.threads:
        torch.set_num_threads(config.run.threads)
    model, tokenizer = load_model(config, model_dir)
    suite = config.env.build_suite()
    collector = make_collector(config, model, tokenizer, suite)
    generator = evaluation_generator(config.run.seed, update)
    with reporting(config.run.progress):
        tasks = validation_tasks(config, suite)
        if mode == "react":
            return react(collector, tasks, temperature=config.eval.temperature,
                         generator=generator)
        return reflexion(collector, tasks, temperature=config.eval.temperature,
                         generator=generator, config=reflexion_config or ReflexionConfig(),
                         max_prompt_tokens=config.rollout.max_prompt_tokens)
