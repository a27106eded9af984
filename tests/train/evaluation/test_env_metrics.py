"""An environment's per-episode metrics (``StepInfo.metrics`` on the last step) reach the
evaluation's metrics, per split, each averaged over the rollouts that report it (the update's
``rollout/env/*``: ``tests/train/test_rollout_metrics.py``)."""

from __future__ import annotations

import torch

from agentcredit.envs.base import Observation, StepInfo, Task
from agentcredit.rollout.collector import CollectorConfig, RolloutCollector
from agentcredit.rollout.policy import Generation
from agentcredit.rollout.prompts import PromptConfig
from agentcredit.train.evaluation.evaluate import evaluate

MAX_STEPS = 3


class CountdownEnv:
    """Any action is valid; the episode ends after ``payload["turns"]`` of them, and that last step
    reports ``payload["metrics"]``."""

    name = "countdown"

    def reset(self, task: Task) -> Observation:
        self.task, self.left = task, task.payload["turns"]
        return Observation(f"{self.left} turns left", ("act",))

    def admissible_actions(self) -> tuple[str, ...]:
        return ("act",)

    def step(self, action_text: str) -> tuple[Observation, float, bool, StepInfo]:
        self.left -= 1
        done = self.left == 0
        metrics = self.task.payload["metrics"] if done else {}
        return Observation(f"{self.left} turns left", ("act",)), 0.0, done, \
            StepInfo(True, False, metrics)


class ActPolicy:
    """Answers ``act`` to every prompt."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def generate(self, prompts, *, temperature, max_new_tokens, generator, tries=None,
                 prompt_cache=None):
        return [Generation([self.tokenizer.eos_token_id], [-0.1], "act") for _ in prompts]


def task(name: str, turns: int, metrics: dict[str, float], split: str = "train") -> Task:
    return Task(task_id=name, env="countdown", split=split, instruction="act", task_type="t",
                payload={"turns": turns, "metrics": metrics})


A = task("a", 1, {"db": 1.0, "communicate": 0.0})
B = task("b", 2, {"db": 0.0})
C = task("c", 1, {})                               # reports nothing
D = task("d", MAX_STEPS + 2, {"db": 1.0})          # the collector truncates it first: no report


def collector(tokenizer) -> RolloutCollector:
    return RolloutCollector(ActPolicy(tokenizer), CountdownEnv,
                            CollectorConfig(max_steps=MAX_STEPS, record_snapshots=False,
                                            prompt=PromptConfig()))


def test_the_evaluation_averages_env_metrics_per_split(fake_tokenizer):
    splits = {"valid": [A, B], "test": [A, C, D]}
    metrics = evaluate(collector(fake_tokenizer), splits, temperature=0.4,
                       generator=torch.Generator().manual_seed(0))
    env = {k: v for k, v in metrics.items() if "/env/" in k}
    assert env == {"eval/valid/env/db": 0.5, "eval/valid/env/communicate": 0.0,
                   "eval/test/env/db": 1.0, "eval/test/env/communicate": 0.0}
