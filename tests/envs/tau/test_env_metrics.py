"""The last step of a conversation reports tau2's reward components (``StepInfo.metrics``), and the
trainer's rollout metrics carry them as ``rollout/env/<basis>``."""

from __future__ import annotations

import pytest
import torch

from agentcredit.envs.tau.engine import TauEnv
from agentcredit.envs.tau.tasks import build_tasks
from agentcredit.envs.tau.users import STOP
from agentcredit.rollout.collector import CollectorConfig, RolloutCollector
from agentcredit.rollout.policy import Generation
from agentcredit.rollout.prompts import PromptConfig
from agentcredit.train.rollout_metrics import rollout_metrics


def tau_task(domain: str, tau_id: str):
    return next(t for t in build_tasks(domain, "base") if t.payload["tau_id"] == tau_id)


@pytest.mark.parametrize(("domain", "tau_id", "expected"), [
    # retail 0: basis DB + NL_ASSERTION, no assertions (NL scores 1, as in tau2)
    ("retail", "0", {"db": 1.0, "nl_assertion": 1.0, "nl_assertion_skipped": 0.0}),
    # retail 2 has assertions and no judge is configured: skipped, and said so
    ("retail", "2", {"db": 1.0, "nl_assertion_skipped": 1.0}),
    # airline 3: basis DB + COMMUNICATE ("4")
    ("airline", "3", {"db": 1.0, "communicate": 1.0}),
])
def test_the_experts_last_step_reports_every_component_and_earlier_steps_none(domain, tau_id,
                                                                            expected):
    env, task = TauEnv(domain), tau_task(domain, tau_id)
    env.reset(task)
    infos = []
    for action in env.expert(task):
        _, _, done, info = env.step(action)
        infos.append(info)
        if done:
            break
    assert done and infos[-1].metrics == expected
    assert all(info.metrics == {} for info in infos[:-1])


class ScriptPolicy:
    """Sends ``actions`` in order, one per call (a single rollout)."""

    def __init__(self, tokenizer, actions):
        self.tokenizer, self.actions = tokenizer, list(actions)

    def generate(self, prompts, *, temperature, max_new_tokens, generator, tries=None,
                 prompt_cache=None):
        return [Generation([self.tokenizer.eos_token_id], [-0.1], self.actions.pop(0))]


def test_the_components_reach_the_rollout_metrics(fake_tokenizer):
    task = tau_task("retail", "0")  # an exchange: the database must change to match
    config = CollectorConfig(max_steps=30, record_snapshots=False, prompt=PromptConfig())
    trajectories = []
    for actions in (TauEnv("retail").expert(task), [STOP]):  # solve it; hang up at once
        collector = RolloutCollector(ScriptPolicy(fake_tokenizer, actions),
                                     lambda: TauEnv("retail"), config)
        trajectories += collector.collect([task], 1, temperature=1.0,
                                          generator=torch.Generator())
    assert [t.won for t in trajectories] == [True, False]
    metrics = rollout_metrics(trajectories)
    # db: the expert's database matches (1), the untouched one does not (0); NL scores 1 in both
    assert {k: v for k, v in metrics.items() if k.startswith("rollout/env/")} == {
        "rollout/env/db": 0.5, "rollout/env/nl_assertion": 1.0,
        "rollout/env/nl_assertion_skipped": 0.0}
