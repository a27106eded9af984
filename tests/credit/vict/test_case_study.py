"""Worked examples from the VICT paper's ALFWorld case study (appendix F.1, Tables 13 and 14),
built as real groups on a generated heat-egg game played on the ALFWorld engine."""

import pytest
import torch

from agentcredit.credit import get_estimator
from agentcredit.credit.vict import VICTConfig, compute_credit, interface_audit
from agentcredit.verifier.atoms import Status

BACKBONES = ("grpo", "rloo", "gigpo")


def _corrections(batch, result, rollout):
    """The final correction of each step of ``rollout``, keyed by its action."""
    steps = (batch.step_rollout == rollout).nonzero().flatten()
    actions = batch.traces[rollout].actions
    return [(actions[t], float(result.extras["correction"][s])) for t, s in enumerate(steps)]


@pytest.fixture(scope="module")
def mixed(group_batch, case):
    return group_batch(case.mixed)


def test_the_case_study_rollouts_end_as_the_paper_describes(play, case):
    assert play(case.success).won
    for failed in case.failed:
        assert not play(failed).won
    premature = play(case.premature).trace.terminal
    assert premature["object_held"] is Status.SAT and premature["transformation"] is Status.UNSAT
    assert premature["premature_placement"] is Status.VIOL


@pytest.mark.parametrize("backbone", BACKBONES)
def test_success_credits_take_heat_and_final_move_but_not_the_fridge_search(mixed, case, backbone):
    result = get_estimator("vict")(mixed, VICTConfig(backbone=backbone))
    credit = dict(_corrections(mixed, result, case.mixed.index(case.success)))
    assert credit["take egg 1 from diningtable 1"] > 0
    assert credit["heat egg 1 with microwave 1"] > 0
    assert credit["move egg 1 to countertop 1"] > 0
    assert credit["go to fridge 1"] == 0 and credit["open fridge 1"] == 0
    # Table 13, steps 3-4: finding the eggs lies on the proof's evidence path.
    assert credit["go to diningtable 1"] > 0
    # Table 13, steps 6-7 and 9: support moves write no core atom.
    assert credit["go to microwave 1"] == 0 and credit["go to countertop 1"] == 0


@pytest.mark.parametrize("backbone", BACKBONES)
def test_failed_rollout_holding_the_egg_gains_on_the_take_and_loses_on_the_premature_move(
        mixed, case, backbone):
    result = get_estimator("vict")(mixed, VICTConfig(backbone=backbone))
    credit = dict(_corrections(mixed, result, case.mixed.index(case.premature)))
    assert credit["take egg 1 from diningtable 1"] > 0
    assert credit["move egg 1 to countertop 1"] < 0
    assert credit["look"] == 0


def test_failed_rollout_core_pulls_in_the_held_egg_it_relies_on(mixed, case):
    computation = compute_credit(mixed, VICTConfig())
    premature = computation.rollouts[case.mixed.index(case.premature)]
    assert premature.direction == -1
    assert {"object_held", "transformation", "premature_placement"} <= premature.core


def test_looping_on_look_earns_no_correction_on_the_loop_steps(mixed, case):
    result = get_estimator("vict")(mixed, VICTConfig())
    credit = _corrections(mixed, result, case.mixed.index(case.looping))
    assert [c for a, c in credit if a == "look"] == [0.0] * 5
    assert dict(credit)["take egg 2 from diningtable 1"] > 0


def test_moving_the_wrong_object_into_the_goal_receptacle_is_blamed_on_that_move(mixed, case):
    result = get_estimator("vict")(mixed, VICTConfig())
    credit = _corrections(mixed, result, case.mixed.index(case.wrong_object))
    assert [a for a, c in credit if c != 0] == ["move potato 1 to countertop 1"]
    assert dict(credit)["move potato 1 to countertop 1"] < 0


def test_a_group_with_equal_rewards_gets_no_correction(group_batch, case):
    batch = group_batch(case.failed)
    result = get_estimator("vict")(batch, VICTConfig())
    assert torch.equal(result.step_advantages, result.extras["base_advantage"])
    assert not result.extras["correction"].any() and result.ledger_rows == []
    assert result.diagnostics["vict/abstain/tie_pct"] == 100.0


def test_every_case_study_correction_is_in_the_ledger_with_its_proof(mixed, case):
    result = get_estimator("vict")(mixed, VICTConfig())
    rows = result.ledger_rows
    flagged = {(r["rollout"], r["step"]) for r in rows}
    nonzero = result.extras["correction"].nonzero().flatten().tolist()
    assert len(flagged) == len(nonzero) > 0
    move = [r for r in rows if r["rollout"] == case.mixed.index(case.premature)
            and r["action"] == "move egg 1 to countertop 1"]
    blame = next(r for r in move if r["atom_id"] == "premature_placement")
    assert blame["relation"] == "write+commit+violation" and blame["delta_hat"] < 0
    assert "inreceptacle(egg 1, countertop 1)" in blame["evidence_source"]
    for step in flagged:
        share = [r for r in rows if (r["rollout"], r["step"]) == step]
        assert sum(r["atom_credit"] for r in share) == pytest.approx(share[0]["vict_advantage"])


def test_the_heat_egg_verifier_interface_passes_its_audit(mixed):
    row = interface_audit(mixed.traces)
    assert (row.atoms_per_task, row.reconstruction_pct, row.mutation_pct) == (7, 100.0, 100.0)
    assert row.eligibility_pass_pct == 100.0 and row.trigger_pct > 0


@pytest.mark.parametrize("backbone", BACKBONES)
def test_vict_corrects_the_backbones_own_step_advantage(mixed, backbone):
    result = get_estimator("vict")(mixed, VICTConfig(backbone=backbone))
    base = get_estimator(backbone)(mixed).step_advantages
    assert torch.equal(result.extras["base_advantage"], base)
    assert torch.equal(result.step_advantages, base + result.extras["correction"])
    if backbone == "gigpo":  # compatibility mode: GiGPO's step level is kept
        assert "anchor_group_ids" in result.extras
