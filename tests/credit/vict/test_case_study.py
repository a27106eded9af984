"""Worked examples from the VICT paper's ALFWorld case study (appendix F.1, Tables 13 and 14),
built as real groups on a generated heat-egg game played on the ALFWorld engine."""

import dataclasses
import random

import pytest
import torch

from agentcredit.credit import CreditBatch, get_estimator
from agentcredit.credit.vict import VICTConfig, compute_credit, interface_audit
from agentcredit.verifier.atoms import Status
from agentcredit.verifier.trace import trace_rollout

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
    assert (row.atoms_per_task, row.reconstruction_pct, row.mutation_pct) == (8, 100.0, 100.0)
    assert row.eligibility_pass_pct == 100.0 and row.trigger_pct > 0


@pytest.mark.parametrize("backbone", BACKBONES)
def test_vict_corrects_the_backbones_own_step_advantage(mixed, backbone):
    result = get_estimator("vict")(mixed, VICTConfig(backbone=backbone))
    base = get_estimator(backbone)(mixed).step_advantages
    assert torch.equal(result.extras["base_advantage"], base)
    assert torch.equal(result.step_advantages, base + result.extras["correction"])
    if backbone == "gigpo":  # compatibility mode: GiGPO's step level is kept
        assert "anchor_group_ids" in result.extras


def _retraced(mixed, play, case, verifier):
    """``mixed`` with every rollout traced again through ``verifier``."""
    traces = []
    for actions in case.mixed:
        p = play(actions)
        traces.append(trace_rollout(verifier, p.observations, p.snapshots, p.actions))
    rewards = [[0.0] * (len(p) - 1) + [10.0 * t.v_score]
               for p, t in zip(case.mixed, traces, strict=True)]
    return CreditBatch.from_lists(rewards, [0] * len(traces), traces=traces,
                                  dtype=torch.float32)


def test_reordering_the_verifiers_atoms_changes_no_credit(mixed, play, case, heat_egg_env,
                                                          heat_egg_task):
    verifier = heat_egg_env.verifier(heat_egg_task)
    reference = get_estimator("vict")(mixed, VICTConfig()).extras["correction"]
    assert reference.any()
    orders = [tuple(reversed(verifier.atoms))]
    # receptacle_found first: under a lowest-index tie rule it alone made the success's core
    found = next(a for a in verifier.atoms if a.atom_id == "receptacle_found")
    orders.append((found,) + tuple(a for a in verifier.atoms if a is not found))
    for seed in range(3):
        atoms = list(verifier.atoms)
        random.Random(seed).shuffle(atoms)
        orders.append(tuple(atoms))
    for atoms in orders:
        batch = _retraced(mixed, play, case, dataclasses.replace(verifier, atoms=atoms))
        result = get_estimator("vict")(batch, VICTConfig())
        assert torch.equal(result.extras["correction"], reference), [a.atom_id for a in atoms]


# HAND-WORKED NEAR MISSES (VICT paper Table 14; docs/vict.md §4.3: witnesses are exactly what
# can change an atom's status)

HEAT = ("go to diningtable 1", "take egg 1 from diningtable 1", "go to microwave 1",
        "heat egg 1 with microwave 1")
SWAPPED_EGG = HEAT + ("go to diningtable 1", "move egg 1 to diningtable 1",
                      "take egg 2 from diningtable 1", "go to countertop 1",
                      "move egg 2 to countertop 1")
SINK = HEAT + ("go to sinkbasin 1", "move egg 1 to sinkbasin 1")


@pytest.fixture(scope="module")
def near_misses(group_batch, case):
    """The success twice, the two near misses and the four wanderers: the median rollout has
    not held, heated or placed an egg, so every departure from it carries a marginal."""
    return group_batch((case.success, SWAPPED_EGG, SINK, case.success) + case.wandering)


def test_heating_one_egg_and_placing_another_cold_blames_the_cold_placement_not_the_heat(
        near_misses, case):
    trace = near_misses.traces[1]
    assert trace.terminal["premature_placement"] is Status.VIOL
    heat = trace.actions.index("heat egg 1 with microwave 1")
    assert not {e.atom_id for e in trace.edges if e.step == heat} & {
        "premature_placement", "transformation"}
    credit = dict(_corrections(near_misses, get_estimator("vict")(near_misses, VICTConfig()), 1))
    assert credit["heat egg 1 with microwave 1"] >= 0
    assert credit["move egg 2 to countertop 1"] < 0


def test_heating_the_egg_then_putting_it_in_the_sink_blames_the_put(near_misses, play):
    trace = near_misses.traces[2]
    assert trace.terminal["target_misplaced"] is Status.VIOL
    assert trace.terminal["transformation"] is Status.SAT
    credit = dict(_corrections(near_misses, get_estimator("vict")(near_misses, VICTConfig()), 2))
    assert credit["move egg 1 to sinkbasin 1"] < 0
    assert credit["heat egg 1 with microwave 1"] > 0  # Table 14: the heat stays supported
    assert min(credit.values()) == credit["move egg 1 to sinkbasin 1"]


def test_putting_the_egg_down_or_walking_away_writes_nothing_to_the_held_or_found_atoms(play):
    trace = play(SWAPPED_EGG + ("go to fridge 1",)).trace
    lasting = {"object_held", "receptacle_found"}
    put_down = trace.actions.index("move egg 1 to diningtable 1")
    leave = len(trace.actions) - 1
    for step in (put_down, leave):
        assert not {e.atom_id for e in trace.edges if e.step == step
                    and e.relation in ("write", "reveal")} & lasting
    first_visit = trace.actions.index("go to countertop 1")
    assert (first_visit, "receptacle_found", "reveal") in {
        (e.step, e.atom_id, e.relation) for e in trace.edges}
