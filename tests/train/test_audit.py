"""The VICT interface audit over scripted and policy rollouts."""

import pytest

from agentcredit.train.audit import run_audit
from agentcredit.train.config import load_config


def test_webshop_audit_reconstructs_every_expert_and_random_rollout():
    config = load_config(None, ["env=webshop", "env.webshop.num_products=50",
                                "env.webshop.goals_per_product=1", "env.webshop.valid_goals=4",
                                "env.webshop.test_goals=1"])
    lines = []
    rows = run_audit(config, None, copies=2, echo=lines.append)
    assert set(rows) == {"expert", "random"}
    assert "split valid, 4 tasks" in lines[0]
    for row in rows.values():
        assert row.rollouts == 8
        assert row.reconstruction_pct == row.mutation_pct == row.eligibility_pass_pct == 100.0
        # each task has one Level-0 atom (purchase_committed) and two irreversible ones (it
        # and wrong_purchase); the rest are Level 1 (webshop/verifier.py)
        assert row.level_pct[0] == pytest.approx(100.0 / row.atoms_per_task)
        assert row.level_pct[1] == pytest.approx(100.0 - row.level_pct[0])
        assert row.level_pct[2] == 0.0
        assert row.irreversible_pct == pytest.approx(200.0 / row.atoms_per_task)
        assert row.irreversible_breaks == 0
    assert "| L0 % | L1 % | L2 % | irrev. % | irrev. breaks |" in lines[1]
