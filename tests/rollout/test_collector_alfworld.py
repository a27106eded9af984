"""The collector on one real ALFWorld game (needs the optional engine)."""

from __future__ import annotations

import pytest
import torch

from agentcredit.rollout.collector import CollectorConfig, RolloutCollector
from agentcredit.rollout.policy import Generation
from agentcredit.train.step_tensors import tensorize_steps

pytest.importorskip("alfworld")
pytestmark = [pytest.mark.engine, pytest.mark.slow]


class ReplayPolicy:
    """Answers one rollout with a fixed action list (the expert's plan)."""

    def __init__(self, tokenizer, actions):
        self.tokenizer = tokenizer
        self.actions = list(actions)

    def generate(self, prompts, *, temperature, max_new_tokens, generator, tries=None,
                 prompt_cache=None):
        (_prompt,) = prompts
        action = self.actions.pop(0)
        ids = self.tokenizer.encode(action, add_special_tokens=False) + [
            self.tokenizer.eos_token_id]
        return [Generation(ids, [0.0] * len(ids), action)]


def test_replaying_the_expert_wins_a_generated_alfworld_game(tmp_path, fake_tokenizer):
    from agentcredit.envs.alfworld.engine import AlfWorldEnv
    from agentcredit.envs.alfworld.generator import generate_split
    from agentcredit.envs.alfworld.options import GeneratorConfig

    (task,) = generate_split("train", 1, GeneratorConfig(seed=0, max_receptacles=6), tmp_path,
                             task_types=("pick_and_place",))
    plan = AlfWorldEnv().expert(task)
    collector = RolloutCollector(ReplayPolicy(fake_tokenizer, plan), AlfWorldEnv,
                                 CollectorConfig(max_steps=len(plan) + 3))
    (traj,) = collector.collect([task], 1, temperature=1.0, generator=torch.Generator())
    assert traj.won and [s.action for s in traj.steps] == plan
    assert [s.reward for s in traj.steps] == [0.0] * (len(plan) - 1) + [10.0]
    assert traj.steps[0].anchor_key.startswith("You are in the middle of a room.")
    assert any(key.startswith(("holds(", "inreceptacle("))
               for key in traj.steps[-1].snapshot)
    steps = tensorize_steps([traj], fake_tokenizer.pad_token_id)
    assert steps.num_response_tokens == sum(len(s.response_ids) for s in traj.steps)
