"""The VICT interface audit over scripted and policy rollouts."""

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
