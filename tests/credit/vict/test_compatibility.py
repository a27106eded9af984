"""VICT on the step-level baselines, the VICT paper's compatibility rows (issue 18):
``method=vict credit.options.backbone=salt|hcapo|gigpo`` (and ProxMO). VICT corrects the
backbone's own step advantage, takes its direction from the backbone's episode level, and
asks the trainer for the backbone's inputs."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch

from agentcredit.credit import CreditBatch, get_estimator
from agentcredit.credit.hindsight import HindsightScores
from agentcredit.credit.vict import VICTConfig, compute_credit

from .synthetic import synthetic_group

STEP_LEVEL = ("salt", "hcapo", "proxmo", "gigpo")


@pytest.fixture(scope="module")
def batch() -> CreditBatch:
    """Two synthetic task groups of 6 rollouts with rewards, actions and hindsight scores."""
    rng = random.Random(7)
    traces, groups = [], []
    for g in range(2):
        traces += synthetic_group(f"task{g}", 6, 5, 6, rng, exact_length=False)
        groups += [g] * 6
    rewards = []
    for t in traces:
        steps = [-0.1 if rng.random() < 0.2 else 0.0 for _ in range(t.num_steps)]
        steps[-1] += 10.0 * t.v_score
        rewards.append(steps)
    states = [[f"s{rng.randrange(3)}" for _ in range(t.num_steps)] for t in traces]
    actions = [[f"a{rng.randrange(2)}" for _ in range(t.num_steps)] for t in traces]
    batch = CreditBatch.from_lists(rewards, groups, states, traces=traces, action_keys=actions)
    steps = batch.num_steps
    return dataclasses.replace(batch, hindsight=HindsightScores(
        hindsight=-torch.rand(steps, generator=torch.Generator().manual_seed(0)),
        behaviour=-torch.rand(steps, generator=torch.Generator().manual_seed(1))))


@pytest.mark.parametrize("backbone", STEP_LEVEL)
def test_vict_corrects_the_step_level_backbones_own_advantage(batch, backbone):
    computation = compute_credit(batch, VICTConfig(backbone=backbone))
    base = get_estimator(backbone)(batch)
    assert torch.equal(computation.base, base.step_advantages)
    assert torch.allclose(computation.final, computation.base + computation.correction)
    assert computation.vict.abs().sum() > 0  # the synthetic groups give VICT something to credit
    if backbone != "gigpo":  # the direction q_i comes from the backbone's episode level
        assert torch.equal(computation.rollout_base, base.extras["episode_advantage"])


def test_vict_on_hcapo_asks_the_trainer_for_the_hindsight_pass():
    from agentcredit.config import load_config

    assert VICTConfig(backbone="hcapo").extra_inputs == {"hindsight"}
    assert get_estimator("vict").inputs(VICTConfig(backbone="salt")) == {"traces"}
    config = load_config(None, ["method=vict", "credit.options.backbone=hcapo",
                                "credit.options.backbone.temperature=2"])
    assert config.inputs == {"traces", "hindsight"}
    assert config.credit.options["backbone"]["temperature"] == 2.0
