"""ADRS's probe diagnostic (docs/adrs.md §5.5; the ADRS paper's §5.5, Fig. 6): the token-class gap.

On a fixed set of probe trajectories (the paper uses four successful ones:
heat, pick-and-place, cool, look) the trainer logs, at every evaluation, the
mean teacher–behaviour gap ``ℓ^T − ℓ^b`` per token class: *action* tokens (the
command words of the parsed action), *object* tokens (the names and numbers
it acts on) and *other* tokens (reasoning, tags, the end-of-turn token).
``probe_token_gap`` runs both scoring passes and returns the metrics;
``response_token_classes`` classifies one response from its text alone. The loop takes its
probes from ``probe_set`` and logs ``probe_gap_metrics`` at every evaluation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import torch
from torch import nn

from agentcredit.config import TrainConfig
from agentcredit.credit.adrs import TOKEN_CLASSES, token_class_gap
from agentcredit.envs.base import Environment, Task
from agentcredit.envs.suites import EnvSuite, environment_spec
from agentcredit.rollout.actions import ActionFormat, parse_action
from agentcredit.rollout.admissible import Decoding
from agentcredit.rollout.prompts import PromptConfig
from agentcredit.rollout.records import Trajectory
from agentcredit.skills.prefix import SkillSplicer
from agentcredit.skills.provider import SkillProvider
from agentcredit.train.build import collector_config
from agentcredit.train.scoring.behaviour_pass import score_steps
from agentcredit.train.scoring.teacher import teacher_logprobs
from agentcredit.train.step_tensors import tensorize_steps
from agentcredit.train.warm_start.sft import demonstration_steps, expert_demonstrations

ACTION, OBJECT, OTHER = (TOKEN_CLASSES.index(name) for name in ("action", "object", "other"))



def action_words(env: str) -> frozenset[str]:
    """The command words of ``env``'s actions (its ``action_words`` hook, ``envs.suites``);
    every other word of an action is an object. Empty: the environment declares none."""
    return environment_spec(env).action_words


def response_token_classes(tokenizer, response_ids: Sequence[int], action_format: ActionFormat,
                           env: str = "alfworld") -> list[int]:
    """The class (index in ``TOKEN_CLASSES``) of every token of one response.

    The response is decoded (special tokens dropped), its action parsed as the
    collector parses it (``rollout.actions.parse_action``), and each word of
    the action marked *action* (one of ``action_words(env)``) or *object*;
    the rest of the text is *other*. A token takes the highest class among its
    characters (action over object over other), so ``" egg"`` is an object
    token. A response whose action cannot be parsed is all *other*.
    """
    words = action_words(env)
    if not words:
        raise ValueError(f"no action words for environment {env!r}; declare them with "
                         "register_environment(..., action_words=(...))")
    ids = list(response_ids)
    text = tokenizer.decode(ids, skip_special_tokens=True)
    char_class = [OTHER] * len(text)
    action = parse_action(text, action_format)
    if action:
        offset = text.rfind(action)
        for match in re.finditer(r"\S+", action):
            kind = ACTION if match.group().lower() in words else OBJECT
            for c in range(offset + match.start(), offset + match.end()):
                char_class[c] = kind
    classes, begin = [], 0
    for k in range(len(ids)):
        end = min(len(tokenizer.decode(ids[:k + 1], skip_special_tokens=True)), len(text))
        span = char_class[begin:end]
        classes.append(ACTION if ACTION in span else OBJECT if OBJECT in span else OTHER)
        begin = max(begin, end)
    return classes


def probe_token_gap(model: nn.Module, tokenizer, probes: Sequence[Trajectory],
                    provider: SkillProvider, *, action_format: ActionFormat,
                    micro_batch_size: int, env: str = "alfworld",
                    temperature: float = 1.0, layout: str = "trees") -> dict[str, float]:
    """Mean ``ℓ^T − ℓ^b`` per token class over the response tokens of ``probes``.

    Scores every step of the probe trajectories with the current policy,
    without (``ℓ^b``) and with (``ℓ^T``) the task's skill, both at ``temperature``, and returns
    ``credit.adrs.token_class_gap``'s ``gap.<class>`` and ``tokens.<class>``
    entries. No gradient, no weight change; both passes run under ``layout``
    (``optim.layout``), as the trainer's do.
    """
    steps = tensorize_steps(probes, tokenizer.pad_token_id)
    behaviour = score_steps(model, steps, micro_batch_size, temperature, layout)
    teacher = teacher_logprobs(model, SkillSplicer(tokenizer), provider, probes, steps,
                               micro_batch_size=micro_batch_size, temperature=temperature,
                               layout=layout)
    classes = torch.tensor([c for t in probes for step in t.steps
                            for c in response_token_classes(tokenizer, step.response_ids,
                                                            action_format, env)])
    return token_class_gap(classes, teacher[steps.loss_mask], behaviour[steps.loss_mask])


def probe_trajectories(make_env: Callable[[], Environment], tasks: Sequence[Task], tokenizer,
                       prompt: PromptConfig, count: int,
                       decoding: Decoding = "free") -> list[Trajectory]:
    """The fixed probe set of the token-gap diagnostic (docs/adrs.md §5.5).

    The successful expert demonstrations of the first task of each task type in
    ``tasks`` (at most ``count`` of them, in task order), as training samples
    (with their allowed sets under admissible ``decoding``): the paper probes one
    successful episode per task family.
    """
    first: dict[str, Task] = {}
    for task in tasks:
        first.setdefault(task.task_type, task)
    chosen = list(first.values())[:count]
    demos = [demo for demo in expert_demonstrations(make_env(), chosen) if demo.won]
    return demonstration_steps(demos, tokenizer, prompt, decoding=decoding) if demos else []


def probe_set(config: TrainConfig, suite: EnvSuite, valid: Mapping[str, Sequence[Task]],
              tokenizer, echo: Callable[[str], None]) -> list[Trajectory]:
    """The run's probe trajectories (``eval.probes`` of them), or none when the run reads no
    skills or the environment's actions cannot be split into action and object tokens."""
    if not (config.uses_skills and config.eval.probes > 0):
        return []
    if not action_words(config.env.name):
        echo(f"probe gap: no action words for environment {config.env.name!r} "
             "(register_environment(..., action_words=...)); not logged")
        return []
    return probe_trajectories(suite.make_env, next(iter(valid.values())), tokenizer,
                              collector_config(config).prompt, config.eval.probes,
                              config.rollout.decoding)


def probe_gap_metrics(model: nn.Module, tokenizer, probes: Sequence[Trajectory],
                      provider: SkillProvider, *, action_format: str, micro_batch_size: int,
                      env: str, temperature: float = 1.0, layout: str = "trees"
                      ) -> dict[str, float]:
    """``eval/probe_gap/{action,object,other}``: mean ``ℓ^T − ℓ^b`` per token class."""
    gap = probe_token_gap(model, tokenizer, probes, provider, action_format=action_format,
                          micro_batch_size=micro_batch_size, env=env, temperature=temperature,
                          layout=layout)
    return {f"eval/probe_gap/{name}": gap[f"gap.{name}"] for name in TOKEN_CLASSES
            if f"gap.{name}" in gap}
