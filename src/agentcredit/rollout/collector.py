"""The multi-turn rollout collector (docs/design.md, "rollout/").

``RolloutCollector.collect`` runs ``group_size`` rollouts of every task, one
environment instance per rollout, for at most ``max_steps`` steps. At every
step it builds the prompt of each still-running rollout, samples all responses
in one batched ``Policy.generate`` call, parses the actions and steps the
environments. Rewards follow docs/backbones.md §2: the invalid-action penalty at the step
that produced it, the outcome ``outcome_reward · 1[won]`` at the last step.

The trajectories it returns are plain records; the trainer turns them into training rows
and a credit batch (``train/step_tensors.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from agentcredit.envs.base import Environment, Task
from agentcredit.rollout.actions import parse_action
from agentcredit.rollout.admissible import ActionTrie, Decoding
from agentcredit.rollout.policy import Generation, Policy, PromptCache
from agentcredit.rollout.prompts import PromptConfig, build_prompt_ids
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.skills.prefix import SkillSplicer
from agentcredit.skills.provider import SkillProvider


@dataclass(frozen=True)
class CollectorConfig:
    """How rollouts are run.

    Attributes:
        max_steps: step limit per rollout (docs/settings.md §6: ALFWorld 50).
        max_new_tokens: response length limit per step.
        invalid_penalty: reward added at a step whose action is unparsable or
            not admissible (docs/backbones.md §2: −0.1 for ALFWorld).
        outcome_reward: scale of the outcome reward at an episode's last step
            (docs/backbones.md §2: 10).
        outcome_signal: ``won`` (the scale times 1[won]) or ``score`` (times the
            environment's reward at the last step, in [0, 1]).
        record_snapshots: store the environment's state snapshot after every step.
        decoding: ``free`` (any text; the papers' setting) or ``admissible`` (each
            response is one of the state's admissible commands, ``rollout.admissible``).
        prompt: how prompts are built.
        reuse_prompt_cache: keep each step's prompt keys and values, so the next step's prompts
            prefill only what follows the prefix they share (``PromptCache``); the samples are
            those of a full prefill, to float rounding.
    """

    max_steps: int = 50
    max_new_tokens: int = 24
    invalid_penalty: float = -0.1
    outcome_reward: float = 10.0
    outcome_signal: str = "won"
    record_snapshots: bool = True
    decoding: Decoding = "free"
    prompt: PromptConfig = field(default_factory=PromptConfig)
    reuse_prompt_cache: bool = False


@dataclass
class _Running:
    """A rollout in progress."""

    trajectory: Trajectory
    env: Environment
    observation: str
    admissible: tuple[str, ...]
    history: list[tuple[str, str]] = field(default_factory=list)
    done: bool = False


class RolloutCollector:
    """Runs groups of rollouts; keeps its environment instances between calls.

    Args:
        policy: samples the responses.
        make_env: builds one environment instance; instances are reused across
            calls (rollout ``k`` of a call always uses instance ``k``), so an
            environment's per-instance caches (ALFWorld's loaded games) help.
        config: limits, rewards and prompt options.
    """

    def __init__(self, policy: Policy, make_env: Callable[[], Environment],
                 config: CollectorConfig):
        self.policy = policy
        self.make_env = make_env
        self.config = config
        self._envs: list[Environment] = []
        self._splicer: SkillSplicer | None = None

    def _env(self, index: int) -> Environment:
        while len(self._envs) <= index:
            self._envs.append(self.make_env())
        return self._envs[index]

    def collect(
        self,
        tasks: Sequence[Task],
        group_size: int,
        *,
        temperature: float,
        generator: torch.Generator,
        first_group_id: int = 0,
        skills: SkillProvider | None = None,
        on_step: Callable[[int], None] | None = None,
    ) -> list[Trajectory]:
        """``group_size`` rollouts of each task; task ``k``'s group id is ``first_group_id + k``.

        ``skills``: only for the baselines that show skills to the acting policy
        (``skill_prompt``, ``skill_grpo``, ``skill_grpo*``, docs/adrs.md §5.6): every prompt then
        carries its task's skill prefix (``SkillSplicer``), and so do the recorded
        ``prompt_ids`` the policy is trained on. ``None`` (the default) never shows a skill.

        ``on_step(n)`` is called after every step with the number of rollouts that ended
        in it (a progress bar's ``update``).

        Returns the trajectories grouped by task, in task order; each has at least one step.
        """
        cfg = self.config
        running = self._start(tasks, group_size, first_group_id)
        # the weights are fixed during one collection, so one step's prompt caches serve the next
        prompt_cache = PromptCache() if cfg.reuse_prompt_cache else None
        if skills is not None and self._splicer is None:
            self._splicer = SkillSplicer(self.policy.tokenizer)
        for t in range(cfg.max_steps):
            active = [r for r in running if not r.done]
            if not active:
                break
            prompts = self._prompts(active, skills)
            tries = None
            if cfg.decoding == "admissible":
                tries = [ActionTrie.from_commands(self.policy.tokenizer, r.admissible,
                                                  cfg.prompt.action_format) for r in active]
            generations = self.policy.generate(prompts, temperature=temperature,
                                               max_new_tokens=cfg.max_new_tokens,
                                               generator=generator, tries=tries,
                                               prompt_cache=prompt_cache)
            last_step = t == cfg.max_steps - 1
            for r, prompt_ids, gen in zip(active, prompts, generations, strict=True):
                self._advance(r, prompt_ids, gen, last_step)
            if on_step is not None:
                on_step(sum(r.done for r in active))
        return [r.trajectory for r in running]

    def _start(self, tasks: Sequence[Task], group_size: int,
               first_group_id: int) -> list[_Running]:
        """Reset one environment instance per rollout: ``group_size`` of each task, in task
        order, task ``k``'s rollouts in group ``first_group_id + k``."""
        running: list[_Running] = []
        for k, task in enumerate(tasks):
            for _ in range(group_size):
                env = self._env(len(running))
                obs = env.reset(task)
                trajectory = Trajectory(task=task, group_id=first_group_id + k,
                                        initial_snapshot=(env.snapshot()
                                                          if self.config.record_snapshots
                                                          else None))
                running.append(_Running(trajectory, env, obs.text, obs.admissible_actions))
        return running

    def _prompts(self, active: Sequence[_Running],
                 skills: SkillProvider | None) -> list[list[int]]:
        """The prompt token ids of each running rollout, with its task's skill prefix when
        ``skills`` is given."""
        cfg = self.config
        tokenizer = self.policy.tokenizer
        prompts = [build_prompt_ids(tokenizer, r.trajectory.task.instruction, r.history,
                                    r.observation, r.admissible, cfg.prompt) for r in active]
        if skills is not None:
            prompts = [self._splicer.privileged_prompt_ids(
                ids, skills.skill_text(r.trajectory.task))
                for r, ids in zip(active, prompts, strict=True)]
        return prompts

    def _advance(self, r: _Running, prompt_ids: Sequence[int], gen: Generation,
                 last_step: bool) -> None:
        """Send one response to its environment and record the ``Step``: reward is the
        invalid-action penalty when the action is unparsable or refused, plus the outcome
        reward (docs/backbones.md §2) when the rollout ends here (done, or ``last_step``)."""
        cfg = self.config
        action = parse_action(gen.text, cfg.prompt.action_format)
        # an unparsable response is still sent: the environment answers it, not us
        obs, env_reward, done, info = r.env.step(gen.text if action is None else action)
        valid = action is not None and info.valid
        reward = 0.0 if valid else cfg.invalid_penalty
        ends = done or last_step
        if ends:
            r.trajectory.final_observation = obs.text
            r.trajectory.final_admissible = tuple(obs.admissible_actions)
            r.trajectory.won = info.won
            r.trajectory.env_metrics = dict(info.metrics)
            signal = float(info.won) if cfg.outcome_signal == "won" else env_reward
            r.trajectory.outcome_reward = cfg.outcome_reward * signal
            r.trajectory.truncated = not done
            reward += r.trajectory.outcome_reward
        r.trajectory.steps.append(Step(
            observation=r.observation,
            response=gen.text,
            action=action,
            valid=valid,
            reward=reward,
            anchor_key=r.observation,
            snapshot=r.env.snapshot() if cfg.record_snapshots else {},
            prompt_ids=list(prompt_ids),
            response_ids=gen.token_ids,
            sampling_logprobs=gen.logprobs,
            env_reward=env_reward,
            allowed_ids=gen.allowed_ids,
            admissible=tuple(r.admissible),
        ))
        r.history.append((r.observation, gen.text.strip() if action is None else action))
        r.observation, r.admissible, r.done = obs.text, obs.admissible_actions, ends
