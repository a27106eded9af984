"""What an update prepares for credit (train/credit_inputs.py): the hindsight pass's rows are
chosen on the rewards DAPO's overlong penalty shaped, and their share is logged. The pass itself
is tests/train/scoring/test_hindsight_pass.py's."""

from __future__ import annotations

import pytest

from agentcredit.config import load_config
from agentcredit.credit.hcapo import hindsight_rollouts
from agentcredit.train.credit_inputs import CreditInputs
from agentcredit.train.model_loading import load_policy

from .scoring.test_hindsight_pass import MICRO, ROLLOUTS, hcapo_inputs


@pytest.fixture(scope="module")
def policy(fake_model_dir):
    return load_policy(str(fake_model_dir))


def test_the_update_chooses_the_rows_on_the_shaped_rewards(policy, tiny_fake_run, fake_suite):
    # a buffer of one token: DAPO's overlong penalty falls on every response of 2+ tokens, so
    # the failed rollouts without a reward are read too
    model, tokenizer = policy
    config = load_config(None, [*tiny_fake_run, "method=hcapo", "rollout.max_new_tokens=2",
                                "rollout.overlong_buffer=0.5",
                                f"optim.score_micro_batch_size={MICRO}"])
    trajectories, steps, old, _ = hcapo_inputs(policy, config.optim.layout)
    prepared = CreditInputs(config, fake_suite(), tokenizer, None).prepare(
        model, trajectories, steps, old, None, update=1)
    multi_step = [len(r[1]) >= 2 for r in ROLLOUTS]
    assert hindsight_rollouts(prepared.batch).tolist() == multi_step
    rows = hindsight_rollouts(prepared.batch)[prepared.batch.step_rollout]
    scores = prepared.batch.hindsight
    assert (scores.hindsight[rows] != scores.behaviour[rows]).all()  # scored, not left at ℓ^b
    lengths = [len(r[1]) for r in ROLLOUTS]
    assert prepared.metrics["score/hindsight_row_share"] == pytest.approx(
        sum(n for n, m in zip(lengths, multi_step, strict=True) if m) / sum(lengths))
    assert "hindsight" in prepared.seconds
