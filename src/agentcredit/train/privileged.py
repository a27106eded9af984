"""The privileged-skill stages of a training run: ADRS and its baselines (docs/adrs.md §5).

Who reads the skill text ``ρ(x)`` (``skills.SkillProvider``), per method name
(``config.METHODS``)::

    method            rollout prompts  eval prompts  teacher pass ℓ^T   trained on
    adrs              -                -             yes                ADRS token advantages
    opsd / sdar       -                -             yes                GRPO + β · aux loss
    skill_prompt      (no training)    yes           -                  -
    skill_grpo        yes              -             -                  GRPO
    skill_grpo*       yes              yes           -                  GRPO
    everything else   -                -             -                  its estimator

The config switches are the estimator's and the auxiliary loss's declared
inputs (``teacher``), ``rollout.skills`` and ``eval.skills``; the collector shows a skill only when
it is handed a provider (``RolloutCollector.collect(skills=...)``), which the loop
does only under ``rollout.skills`` / ``eval.skills`` (tested end to end).

Stages, in the order the loop calls them:

- ``check_skill_texts``: every task of the run has its skill text, before anything runs.
- ``skill_tokenizer_corpus``: the skill texts join the embedded tokenizer's corpus,
  so a skill is not spelled out byte by byte.
- ``with_skill_demonstrations``: the SFT skill mixing of ``sft.skill_share``.
- ``teacher_logprobs``: ``ℓ^T`` of a batch under the frozen behaviour snapshot.
- ``probe_set`` / ``probe_gap_metrics``: the token-class gap at every evaluation.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence

from torch import Tensor, nn

from agentcredit.config import TrainConfig
from agentcredit.credit.adrs import TOKEN_CLASSES
from agentcredit.credit.step import StepTensors
from agentcredit.envs.base import Environment, Task
from agentcredit.envs.suites import EnvSuite
from agentcredit.rollout.admissible import Decoding
from agentcredit.rollout.prompts import PromptConfig
from agentcredit.rollout.records import Trajectory
from agentcredit.skills import SkillProvider, SkillSplicer, with_skill_prompts
from agentcredit.train.build import collector_config
from agentcredit.train.probes import ACTION_WORDS, probe_token_gap
from agentcredit.train.sft import demonstration_steps, expert_demonstrations
from agentcredit.train.teacher import privileged_logprobs

# BPE merges a pair only when it occurs twice (TinyModelConfig.min_frequency): each
# task-type file occurs once in the corpus, so it goes in twice.
_SKILL_CORPUS_COPIES = 2


def check_skill_texts(provider: SkillProvider, tasks: Iterable[Task]) -> None:
    """Raise ``SkillNotFoundError`` (naming the missing file) unless every task has its skill."""
    for env, task_type in sorted({(task.env, task.task_type) for task in tasks}):
        provider.text_for(env, task_type)


def skill_tokenizer_corpus(provider: SkillProvider, env: str) -> list[str]:
    """The skill texts of ``env`` for the embedded tokenizer; none when ``env`` has no skills.

    Added for every method alike, so a comparison's runs share one tokenizer and one start.
    """
    if not provider.has_texts(env):
        return []
    return provider.corpus(env) * _SKILL_CORPUS_COPIES


def with_skill_demonstrations(samples: Sequence[Trajectory], share: float,
                              provider: SkillProvider, splicer: SkillSplicer,
                              seed: int) -> list[Trajectory]:
    """``samples`` plus skill-prefixed copies of ``round(share · len(samples))`` of them.

    The copied demonstrations are drawn with ``random.Random(seed)``; ``share = 0``
    returns the samples unchanged. See ``SFTConfig.skill_share`` for why and when.
    """
    count = round(share * len(samples))
    if count == 0:
        return list(samples)
    chosen = sorted(random.Random(seed).sample(range(len(samples)), count))
    return [*samples, *with_skill_prompts([samples[i] for i in chosen], provider, splicer)]


def teacher_logprobs(model: nn.Module, splicer: SkillSplicer, provider: SkillProvider,
                     trajectories: Sequence[Trajectory], steps: StepTensors, *,
                     micro_batch_size: int, reuse_prefix: bool,
                     temperature: float = 1.0) -> Tensor:
    """``ℓ^T [S, L]`` of the batch's sampled tokens (docs/adrs.md §5.1), 0 off the response tokens.

    ``model`` must be the frozen behaviour snapshot: the policy that sampled the
    batch, before this update. The pass takes no gradient and changes no weight
    (``train/teacher.py``; tested in the loop). Steps sampled with admissible decoding are
    scored over the same allowed sets (``steps.allowed``), at the policy's ``temperature``.
    """
    skills = [provider.skill_text(t.task) for t in trajectories for _ in t.steps]
    return privileged_logprobs(model, splicer, steps.input_ids, steps.attention_mask,
                               steps.loss_mask, skills, micro_batch_size=micro_batch_size,
                               reuse_prefix=reuse_prefix, allowed=steps.allowed,
                               temperature=temperature)


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
    if config.env.name not in ACTION_WORDS:
        echo(f"probe gap: no action words for environment {config.env.name!r} "
             "(train.probes.ACTION_WORDS); not logged")
        return []
    return probe_trajectories(suite.make_env, next(iter(valid.values())), tokenizer,
                              collector_config(config).prompt, config.eval.probes,
                              config.rollout.decoding)


def probe_gap_metrics(model: nn.Module, tokenizer, probes: Sequence[Trajectory],
                      provider: SkillProvider, *, action_format: str, micro_batch_size: int,
                      env: str, temperature: float = 1.0) -> dict[str, float]:
    """``eval/probe_gap/{action,object,other}``: mean ``ℓ^T − ℓ^b`` per token class."""
    gap = probe_token_gap(model, tokenizer, probes, provider, action_format=action_format,
                          micro_batch_size=micro_batch_size, env=env, temperature=temperature)
    return {f"eval/probe_gap/{name}": gap[f"gap.{name}"] for name in TOKEN_CLASSES
            if f"gap.{name}" in gap}

