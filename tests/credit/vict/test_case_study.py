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


ONE_OF_8 = 1.0 / (7 ** 0.5 / 8 + 1e-6)  # docs/vict.md §4.5: δ̂ of the 1 rollout of 8 that differs


def test_taking_then_placing_the_wrong_object_blames_the_take_and_the_move(mixed, case):
    # Only the potato rollout violates wrong_object_held and wrong_object_placed: δ = −1 there,
    # 0 elsewhere, so δ̂ = −1/(√7/8) for both; every other atom of its core sits at the group
    # median (δ̂ = 0). The take reveals held:potato 1 and makes wrong_object_held VIOL (ω = 2,
    # Z = 2); the move writes the potato's placement, commits and violates (ω = 3, Z = 3).
    wrong = case.mixed.index(case.wrong_object)
    computation = compute_credit(mixed, VICTConfig())
    got = computation.vict[mixed.step_rollout == wrong].tolist()
    assert got == pytest.approx([0.0, 0.0, -ONE_OF_8, 0.0, -ONE_OF_8])
    credit = _corrections(mixed, get_estimator("vict")(mixed, VICTConfig()), wrong)
    assert [a for a, c in credit if c < 0] == ["take potato 1 from fridge 1",
                                               "move potato 1 to countertop 1"]
    assert [a for a, c in credit if c > 0] == []


WRONG_TAKE = ("go to fridge 1", "open fridge 1", "take potato 1 from fridge 1", "look")


def test_table_14_row_1_taking_the_potato_is_blamed_and_the_search_is_not(group_batch, case):
    """Table 14, row 1: "takes potato 1 from the fridge after failing to find an egg":
    wrong_object_held is VIOL and the blame sits on the first wrong-object write."""
    batch = group_batch((case.success, WRONG_TAKE, case.premature, case.looping)
                        + case.wandering)
    trace = batch.traces[1]
    assert trace.terminal["wrong_object_held"] is Status.VIOL
    assert trace.terminal["object_held"] is Status.UNSAT
    computation = compute_credit(batch, VICTConfig())
    # As above, wrong_object_held: δ̂ = −1/(√7/8), all of it on the take (reveal + violation).
    # receptacle_found (4 of 8 found one, δ̂ = −0.6745 here) has no witness in this rollout.
    assert computation.vict[batch.step_rollout == 1].tolist() == pytest.approx(
        [0.0, 0.0, -ONE_OF_8, 0.0])
    credit = dict(_corrections(batch, get_estimator("vict")(batch, VICTConfig()), 1))
    assert credit["take potato 1 from fridge 1"] < 0
    assert credit["go to fridge 1"] == credit["open fridge 1"] == credit["look"] == 0.0


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
    # the atom's irreversibility flag travels with its row (VICT paper Table 9; docs/vict.md §4.7)
    assert blame["irreversible"] is False
    take = next(r for r in rows if r["rollout"] == case.mixed.index(case.premature)
                and r["action"] == "take egg 1 from diningtable 1")
    assert (take["atom_id"], take["irreversible"]) == ("object_held", True)
    for step in flagged:
        share = [r for r in rows if (r["rollout"], r["step"]) == step]
        assert sum(r["atom_credit"] for r in share) == pytest.approx(share[0]["vict_advantage"])


def test_the_heat_egg_verifier_interface_passes_its_audit(mixed):
    row = interface_audit(mixed.traces)
    assert (row.atoms_per_task, row.reconstruction_pct, row.mutation_pct) == (9, 100.0, 100.0)
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


def test_no_near_miss_changes_an_atom_flagged_irreversible_after_it_settled(near_misses, mixed):
    # SWAPPED_EGG heats egg 1 (transformation SAT), then places egg 2 cold (UNSAT): the
    # flag must say transformation can be undone; puts and walks must not undo held/found.
    row = interface_audit(list(near_misses.traces) + list(mixed.traces))
    assert row.irreversible_breaks == 0 and row.irreversible_pct == pytest.approx(300 / 9)
    assert row.level_pct == pytest.approx((200 / 9, 0.0, 700 / 9))


RECOVERED = ("go to fridge 1", "open fridge 1", "take potato 1 from fridge 1",
             "move potato 1 to fridge 1", "go to diningtable 1", "take egg 1 from diningtable 1",
             "go to microwave 1", "heat egg 1 with microwave 1", "go to countertop 1",
             "move egg 1 to countertop 1")


def test_a_wrong_take_that_is_put_back_before_the_egg_is_taken_is_no_violation_at_the_end(play):
    played = play(RECOVERED)
    statuses = [row[played.trace.atom_ids.index("wrong_object_held")]
                for row in played.trace.statuses]
    assert statuses[3] is Status.VIOL  # after the potato is taken
    assert statuses[6] is statuses[-1] is Status.UNSAT  # cleared by taking the egg
    assert played.won and played.trace.f_score == played.trace.v_score == 1.0


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
