"""The VICT interface audit over scripted and policy rollouts."""

import pytest

from agentcredit.config import load_config
from agentcredit.train.evaluation.audit import SINGLE_COPY_NOTE, run_audit


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


def _webshop():
    return load_config(None, ["env=webshop", "env.webshop.num_products=50",
                              "env.webshop.goals_per_product=1", "env.webshop.valid_goals=4",
                              "env.webshop.test_goals=1"])


def test_the_audit_explains_every_column_of_its_table_and_shows_its_progress(capsys):
    from agentcredit.progress import reporting
    from agentcredit.train.evaluation.audit import AUDIT_LEGEND

    lines = []
    with reporting(True):
        run_audit(_webshop(), None, copies=2, echo=lines.append)
    header = [c.strip() for c in lines[1].splitlines()[0].strip("|").split("|")]
    explained = [part.strip() for column, _ in AUDIT_LEGEND for part in column.split(" / ")]
    assert explained == header  # one legend entry per column, in the table's order
    footer = lines[2].splitlines()
    assert footer[0] == "columns:" and footer[1].split()[0] == "rollouts"
    assert SINGLE_COPY_NOTE not in lines
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("audit: 0/8 tasks") and err[-1].startswith("audit: 8/8 tasks in")


def test_one_copy_per_task_says_why_every_group_abstains_as_a_tie():
    lines = []
    rows = run_audit(_webshop(), None, copies=1, echo=lines.append)
    assert all(row.abstain_pct == 100.0 and row.top_abstention_reason == "tie"
               for row in rows.values())
    assert lines[-1] == SINGLE_COPY_NOTE
