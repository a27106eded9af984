"""verl's agent loop over the project's environments (docs/verl.md, "The agent loop").

``AgentCreditLoop`` (registered as ``agentcredit``) plays one rollout of one task per
call through verl's async server manager (``LLMServerClient.generate``) and returns one
``AgentLoopOutput`` per step, the per-step layout verl-agent uses and verl 0.9's v1
trainer stores as ``{uid}_{session_id}_{index}``. Each output carries the step's fields
of ``rows.STEP_FIELDS`` (trajectory id, step index, anchor key, the verifier trace on
step 0, the task's skill id) in ``extra_fields``. The fields are plain data but the
trace, which travels pickled (``rows.pack_trace``): verl dumps each output with pydantic
(``AgentLoopOutput.as_dict``), which would turn the ``RolloutTrace`` dataclass into
dicts; the trainer unpickles it (``rows.credit_batch_from_rows``).

Every output also carries ``min_global_steps`` / ``max_global_steps``, the weights versions
the rollout was sampled with (``WeightVersions``), which verl's v1 trainer reads from every
row at the end of a step.

The rollout itself is the embedded collector's (``episode.play_rollout``), so an
environment answers bad actions exactly as it does in ``agentcredit train``. A rollout
that raises (a server error, a broken game file) is dropped: the loop returns no
output, logs it, and counts it in ``dropped_rollouts()``; the trainer reports the
group's missing sessions as ``agentcredit/dropped_rollouts``.

Dataset rows name their task with ``ac_task = {"split": ..., "task_id": ...}``
(``examples/verl/prepare_tasks.py`` writes them); the run's agentcredit config comes
from verl's ``agentcredit.config`` / ``agentcredit.overrides`` keys.
"""

from __future__ import annotations

import logging
import threading
import uuid
from functools import lru_cache
from typing import Any

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)

from agentcredit.config import TrainConfig, estimator_config, load_config
from agentcredit.credit import get_estimator
from agentcredit.envs.base import Task
from agentcredit.integrations.verl import PLUGIN_NAME, rows
from agentcredit.integrations.verl.episode import EnvPool, play_rollout
from agentcredit.rollout.collector import CollectorConfig
from agentcredit.train.build import collector_config

logger = logging.getLogger(__name__)

AGENT_NAME = PLUGIN_NAME
#: the dataset column naming a row's task.
TASK_COLUMN = "ac_task"

_dropped = 0
_dropped_lock = threading.Lock()


def dropped_rollouts() -> int:
    """Rollouts this process dropped because they raised."""
    return _dropped


@lru_cache(maxsize=4)
def run_setup(config_name: str, overrides: tuple[str, ...]) -> RunSetup:
    """The agentcredit side of a verl run, built once per process and config."""
    return RunSetup(load_config(config_name or None, list(overrides)))


def agentcredit_settings(verl_config) -> tuple[str, tuple[str, ...]]:
    """``(config, overrides)`` from verl's ``agentcredit`` section (``+agentcredit.config=hf``)."""
    section = verl_config.get("agentcredit", None) or {}
    return str(section.get("config", "") or ""), tuple(section.get("overrides", ()) or ())


class RunSetup:
    """What every rollout of a run shares: tasks by id, environments, collector options."""

    def __init__(self, config: TrainConfig):
        self.config = config
        suite = config.env.build_suite()
        self.pool = EnvPool(suite.make_env)
        self._suite = suite
        self._tasks: dict[str, dict[str, Task]] = {}
        self._lock = threading.Lock()
        self.collector: CollectorConfig = collector_config(config)
        estimator = get_estimator(config.credit.estimator)
        self.trace = "traces" in estimator.inputs(estimator_config(config.credit))

    def task(self, split: str, task_id: str) -> Task:
        with self._lock:
            if split not in self._tasks:
                self._tasks[split] = {t.task_id: t for t in self._suite.tasks(split)}
        try:
            return self._tasks[split][task_id]
        except KeyError:
            raise KeyError(f"task {task_id!r} is not in the {split!r} split of env "
                           f"{self.config.env.name!r}; regenerate the dataset with "
                           "examples/verl/prepare_tasks.py for this config.") from None


@register(AGENT_NAME)
class AgentCreditLoop(AgentLoopBase):
    """One rollout of one of the project's environments, one output per step (module docs)."""

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> list[AgentLoopOutput]:
        global _dropped
        setup = run_setup(*agentcredit_settings(self.config))
        spec = kwargs[TASK_COLUMN]
        uid, session = kwargs.get("uid", uuid.uuid4().hex), kwargs.get("session_id", 0)
        trajectory_id = f"{uid}_{session}"
        versions = WeightVersions(kwargs.get("global_steps"))
        try:
            task = setup.task(str(spec["split"]), str(spec["task_id"]))
            rollout = await play_rollout(
                self._generate_with(sampling_params, trajectory_id, versions), self.tokenizer,
                stop_ids(self.tokenizer), setup.pool, task, setup.collector,
                temperature=float(sampling_params.get("temperature", 1.0)), trace=setup.trace)
        except Exception:  # one failed rollout must not kill the training step
            with _dropped_lock:
                _dropped += 1
            logger.exception("agentcredit: dropped rollout %s (%d dropped so far)",
                             trajectory_id, _dropped)
            return []
        return step_outputs(rollout.trajectory, rollout.trace, trajectory_id, versions.fields())

    def _generate_with(self, sampling_params: dict[str, Any], request_id: str,
                       versions: WeightVersions):
        async def generate(prompt_ids: list[int], temperature: float, max_new_tokens: int):
            params = {**sampling_params, "temperature": temperature,
                      "max_tokens": max_new_tokens, "logprobs": True}
            output = await self.server_manager.generate(
                request_id=request_id, prompt_ids=prompt_ids, sampling_params=params)
            versions.saw(getattr(output, "extra_fields", None) or {})
            return list(output.token_ids), list(output.log_probs or [0.0] * len(output.token_ids))

        return generate


class WeightVersions:
    """The model weights versions one rollout was sampled with: verl's ``min_global_steps`` /
    ``max_global_steps``, which its server client puts in every response's ``extra_fields``
    and its v1 trainer reads from every row's tags (``_compute_metrics``'s staleness
    metrics; a row without them stops the step). A rollout whose server reports none gets
    the step its prompt was sampled for (``global_steps``)."""

    def __init__(self, sampled_at: int | None):
        self._sampled_at = sampled_at
        self._low: int | None = None
        self._high: int | None = None

    def saw(self, extra_fields: dict[str, Any]) -> None:
        """Take in one response's ``extra_fields``."""
        low = extra_fields.get("min_global_steps", extra_fields.get("global_steps"))
        high = extra_fields.get("max_global_steps", extra_fields.get("global_steps"))
        if low is not None:
            self._low = int(low) if self._low is None else min(self._low, int(low))
        if high is not None:
            self._high = int(high) if self._high is None else max(self._high, int(high))

    def fields(self) -> dict[str, int | None]:
        """``{"min_global_steps": ..., "max_global_steps": ...}`` for every step's output."""
        low = self._sampled_at if self._low is None else self._low
        high = self._sampled_at if self._high is None else self._high
        return {"min_global_steps": low, "max_global_steps": high}


def stop_ids(tokenizer) -> list[int]:
    """The ids that end a response: eos, as ``HFPolicy`` stops (generation eos ids are the
    server's own business; it stops on them and returns them)."""
    return [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []


def step_outputs(trajectory, trace, trajectory_id: str,
                 versions: dict[str, int | None]) -> list[AgentLoopOutput]:
    """One ``AgentLoopOutput`` per step: the step's prompt, its response, its fields
    (``rows.step_fields``; ``trace``, a ``RolloutTrace`` or ``None``, goes pickled) and the
    rollout's weights versions (``WeightVersions.fields``) on every step."""
    outputs = []
    for step, fields in zip(trajectory.steps, rows.step_fields(trajectory, trajectory_id, trace),
                            strict=True):
        outputs.append(AgentLoopOutput(
            prompt_ids=list(step.prompt_ids),
            response_ids=list(step.response_ids),
            response_mask=[1] * len(step.response_ids),
            response_logprobs=list(step.sampling_logprobs),
            # verl's rm_scores; the advantage step reads ac_reward instead
            reward_score=float(step.reward),
            num_turns=2,
            metrics=AgentLoopMetrics(),
            extra_fields={**fields, **versions, "reward_extra_info": {}},
        ))
    return outputs
