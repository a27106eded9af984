"""Worked examples from the VICT paper's ALFWorld case study (appendix F.1, Tables 13 and 14),
built as real groups on a generated heat-egg game played on the ALFWorld engine, the eggs on a
countertop as in the paper.

Each trace of the tables is checked in groups of 8 with 1, 4, 5 and 7 successes. Expected signs
are the tables' (docs/vict.md §4.5): with mean centring an atom that every rollout of the group
shares earns nothing, so where a composition makes an atom shared the expected credit is 0,
read off the composition, never off the output."""

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


SUCCESSES = (1, 4, 5, 7)


def _group_credit(group_batch, rollouts, index, backbone="grpo"):
    batch = group_batch(rollouts)
    result = get_estimator("vict")(batch, VICTConfig(backbone=backbone))
    return dict(_corrections(batch, result, index))


def _someone_never(rollouts, case, flag):
    """Whether a rollout of the group never held an egg (``held``) or never heated one
    (``heated``): the composition, not the credit, says whether that atom is shared."""
    holds_egg = {case.success, case.premature, case.sink, case.looping}
    heats_egg = {case.success, case.sink}
    return any(r not in (holds_egg if flag == "held" else heats_egg) for r in rollouts)


def test_the_case_study_rollouts_end_as_the_paper_describes(play, case):
    assert play(case.success).won
    for failed in case.failures:
        assert not play(failed).won
    premature = play(case.premature).trace.terminal
    assert premature["object_held"] is Status.SAT and premature["transformation"] is Status.UNSAT
    assert premature["premature_placement"] is Status.VIOL
    # the eggs start on a countertop, the goal's type: no placement at reset
    reset = dict(zip(play(case.success).trace.atom_ids, play(case.success).trace.statuses[0],
                     strict=True))
    assert reset["final_placement"] is Status.UNSAT
    assert not any(z is Status.VIOL for z in reset.values())
    # the heated egg in the sink is misplaced although eggs 2 and 3 lie on countertop 2
    sink = play(case.sink).trace.terminal
    assert sink["target_misplaced"] is Status.VIOL and sink["transformation"] is Status.SAT


@pytest.mark.parametrize("successes", SUCCESSES)
def test_table_13_success_credits_reveal_take_heat_and_move_but_not_the_fridge(
        group_batch, case, successes):
    credit = _group_credit(group_batch, case.group(successes), 0)
    assert credit["go to fridge 1"] == credit["open fridge 1"] == 0.0  # reveal, no core
    assert credit["go to countertop 2"] > 0  # steps 3-4: the eggs are grounded
    assert credit["take egg 1 from countertop 2"] > 0  # step 5: direct write
    assert credit["heat egg 1 with microwave 1"] > 0  # step 8: direct write
    assert credit["move egg 1 to countertop 1"] > 0  # step 10: write + commit
    # steps 6-7 and 9: the support path, 0/+ (the heat needs no open microwave)
    assert credit["go to microwave 1"] > 0 and credit["go to countertop 1"] > 0
    assert credit["open microwave 1"] == 0.0


@pytest.mark.parametrize("backbone", BACKBONES)
def test_table_13_holds_on_every_backbone(group_batch, case, backbone):
    credit = _group_credit(group_batch, case.group(4), 0, backbone)
    assert credit["take egg 1 from countertop 2"] > 0 and credit["move egg 1 to countertop 1"] > 0
    assert credit["go to fridge 1"] == 0.0


@pytest.mark.parametrize("successes", SUCCESSES)
def test_table_14_row_1_the_wrong_take_is_blamed_and_the_search_is_not(
        group_batch, case, successes):
    rollouts = case.group(successes, case.wrong_take)
    credit = _group_credit(group_batch, rollouts, successes)
    assert credit["take potato 1 from fridge 1"] < 0
    assert credit["go to fridge 1"] == credit["open fridge 1"] == credit["look"] == 0.0


@pytest.mark.parametrize("successes", SUCCESSES)
def test_table_14_row_2_the_premature_move_is_blamed_and_the_take_keeps_its_credit(
        group_batch, case, successes):
    rollouts = case.group(successes, case.premature)
    credit = _group_credit(group_batch, rollouts, successes)
    assert credit["move egg 1 to countertop 1"] < 0
    take = credit["take egg 1 from countertop 2"]
    assert take > 0 if _someone_never(rollouts, case, "held") else take == 0.0
    assert credit["look"] == 0.0


@pytest.mark.parametrize("successes", SUCCESSES)
def test_table_14_row_3_the_heat_is_supported_and_the_sink_move_blamed(
        group_batch, case, successes):
    rollouts = case.group(successes, case.sink)
    credit = _group_credit(group_batch, rollouts, successes)
    assert credit["move egg 1 to sinkbasin 1"] < 0
    assert min(credit.values()) == credit["move egg 1 to sinkbasin 1"]
    heat = credit["heat egg 1 with microwave 1"]
    assert heat > 0 if _someone_never(rollouts, case, "heated") else heat == 0.0


@pytest.mark.parametrize("successes", SUCCESSES)
def test_table_14_row_4_no_op_loops_after_the_take_earn_nothing(group_batch, case, successes):
    rollouts = case.group(successes, case.looping)
    batch = group_batch(rollouts)
    result = get_estimator("vict")(batch, VICTConfig())
    credit = _corrections(batch, result, successes)
    loop = credit[2:]
    assert [a for a, _ in loop] == list(case.looping[2:])
    assert [c for _, c in loop] == [0.0] * len(loop)
    take = dict(credit)["take egg 2 from countertop 2"]
    assert take > 0 if _someone_never(rollouts, case, "held") else take == 0.0


def test_a_failed_rollout_gets_credit_of_both_signs_under_the_mean_and_not_the_median(
        group_batch, case):
    """docs/vict.md §4.5: under the median a failure on the majority side has δ̂ = 0 on every
    atom it shares with the majority, so its correction carries its base advantage's sign."""
    batch = group_batch(case.group(4, case.premature))
    signs = {}
    for centre in ("mean", "median"):
        result = get_estimator("vict")(batch, VICTConfig(centre=centre))
        credit = [c for _, c in _corrections(batch, result, 4)]
        signs[centre] = {c > 0 for c in credit if c != 0}
    assert signs["mean"] == {True, False}
    assert signs["median"] <= {False}


def test_failed_rollout_core_is_its_missing_heat_and_violation_with_the_held_egg(mixed, case):
    computation = compute_credit(mixed, VICTConfig())
    premature = computation.rollouts[case.mixed.index(case.premature)]
    assert premature.direction == -1
    assert premature.core == {"object_held", "transformation", "premature_placement"}
    success = computation.rollouts[0]
    assert success.core == {"object_held", "transformation", "final_placement"}


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
    premature = case.mixed.index(case.premature)
    move = [r for r in rows if r["rollout"] == premature
            and r["action"] == "move egg 1 to countertop 1"]
    blame = next(r for r in move if r["atom_id"] == "premature_placement")
    assert blame["relation"] == "write+commit+violation" and blame["delta_hat"] < 0
    assert "inreceptacle(egg 1, countertop 1)" in blame["evidence_source"]
    # the atom's irreversibility flag travels with its row (VICT paper Table 9; docs/vict.md §4.7)
    assert blame["irreversible"] is False
    take = next(r for r in rows if r["rollout"] == premature
                and r["action"] == "take egg 1 from countertop 2")
    assert (take["atom_id"], take["irreversible"]) == ("object_held", True)
    walk = next(r for r in rows if r["rollout"] == 0 and r["action"] == "go to countertop 1"
                and r["atom_id"] == "final_placement")
    assert walk["relation"] == "support"
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


def _retraced(play, case, verifier):
    """``case.mixed`` with every rollout traced again through ``verifier``."""
    traces = []
    for actions in case.mixed:
        p = play(actions)
        traces.append(trace_rollout(verifier, p.observations, p.snapshots, p.actions,
                                    admissible=p.admissible))
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
    for seed in range(3):
        atoms = list(verifier.atoms)
        random.Random(seed).shuffle(atoms)
        orders.append(tuple(atoms))
    for atoms in orders:
        batch = _retraced(play, case, dataclasses.replace(verifier, atoms=atoms))
        result = get_estimator("vict")(batch, VICTConfig())
        assert torch.equal(result.extras["correction"], reference), [a.atom_id for a in atoms]


# HAND-WORKED NEAR MISSES (VICT paper Table 14; docs/vict.md §4.3: witnesses are exactly what
# can change an atom's status)

HEAT = ("go to countertop 2", "take egg 1 from countertop 2", "go to microwave 1",
        "heat egg 1 with microwave 1")
SWAPPED_EGG = HEAT + ("go to sinkbasin 1", "move egg 1 to sinkbasin 1", "go to countertop 2",
                      "take egg 2 from countertop 2", "go to countertop 1",
                      "move egg 2 to countertop 1")
TAKEN_BACK = ("go to countertop 2", "take egg 1 from countertop 2", "go to countertop 1",
              "move egg 1 to countertop 1", "take egg 1 from countertop 1", "go to fridge 1")
POTATO_SHUFFLE = ("go to fridge 1", "open fridge 1", "take potato 1 from fridge 1",
                  "go to countertop 1", "move potato 1 to countertop 1",
                  "take potato 1 from countertop 1", "go to countertop 2",
                  "move potato 1 to countertop 2")


@pytest.fixture(scope="module")
def near_misses(group_batch, case):
    """The success twice, the swapped egg, the taken-back egg and the wanderers."""
    return group_batch((case.success, SWAPPED_EGG, TAKEN_BACK, case.success) + case.wandering)


def test_heating_one_egg_and_placing_another_cold_blames_the_cold_placement_not_the_heat(
        near_misses):
    trace = near_misses.traces[1]
    assert trace.terminal["premature_placement"] is Status.VIOL
    heat = trace.actions.index("heat egg 1 with microwave 1")
    assert not {e.atom_id for e in trace.edges if e.step == heat} & {
        "premature_placement", "transformation"}
    credit = dict(_corrections(near_misses, get_estimator("vict")(near_misses, VICTConfig()), 1))
    assert credit["heat egg 1 with microwave 1"] >= 0
    assert credit["move egg 2 to countertop 1"] < 0


def test_an_atom_that_ends_unsat_blames_the_take_back_not_the_good_move_it_undid(near_misses):
    trace = near_misses.traces[2]
    assert trace.terminal["final_placement"] is Status.UNSAT
    move = trace.actions.index("move egg 1 to countertop 1")
    back = trace.actions.index("take egg 1 from countertop 1")
    placement = {(e.step, e.relation) for e in trace.edges if e.atom_id == "final_placement"}
    assert (back, "write") in placement
    assert not {(s, r) for s, r in placement if s <= move}
    # (the engine ends a won game, so the egg taken back is a cold one: the write's proof record
    # fails on the unheated egg, and tests/verifier/test_trace.py checks the credit itself)


def test_taking_the_egg_from_the_goal_type_countertop_writes_no_penalty(play, case):
    trace = play(case.success).trace
    take = trace.actions.index("take egg 1 from countertop 2")
    assert {e.atom_id for e in trace.edges if e.step == take} == {"object_held"}


def test_taking_a_distractor_off_the_goal_receptacle_is_not_blamed(play):
    trace = play(POTATO_SHUFFLE).trace
    assert trace.terminal["wrong_object_placed"] is Status.VIOL
    back = trace.actions.index("take potato 1 from countertop 1")
    last = len(trace.actions) - 1
    wrong = {(e.step, e.relation) for e in trace.edges if e.atom_id == "wrong_object_placed"}
    assert not {r for s, r in wrong if s == back}
    assert {"write", "violation"} <= {r for s, r in wrong if s == last}


def test_no_near_miss_changes_an_atom_flagged_irreversible_after_it_settled(near_misses, mixed):
    # SWAPPED_EGG heats egg 1 (transformation SAT), then places egg 2 cold (UNSAT): the
    # flag must say transformation can be undone; puts and walks must not undo "held".
    row = interface_audit(list(near_misses.traces) + list(mixed.traces))
    assert row.irreversible_breaks == 0 and row.irreversible_pct == pytest.approx(100 / 7)
    assert row.level_pct == pytest.approx((200 / 7, 0.0, 500 / 7))


RECOVERED = ("go to fridge 1", "open fridge 1", "take potato 1 from fridge 1",
             "move potato 1 to fridge 1", "go to countertop 2", "take egg 1 from countertop 2",
             "go to microwave 1", "heat egg 1 with microwave 1", "go to countertop 1",
             "move egg 1 to countertop 1")


def test_a_wrong_take_that_is_put_back_before_the_egg_is_taken_is_no_violation_at_the_end(play):
    played = play(RECOVERED)
    statuses = [row[played.trace.atom_ids.index("wrong_object_held")]
                for row in played.trace.statuses]
    assert statuses[3] is Status.VIOL  # after the potato is taken
    assert statuses[6] is statuses[-1] is Status.UNSAT  # cleared by taking the egg
    assert played.won and played.trace.f_score == played.trace.v_score == 1.0


def test_putting_the_egg_down_or_walking_away_writes_nothing_to_the_held_atom(play):
    trace = play(SWAPPED_EGG + ("go to fridge 1",)).trace
    put_down = trace.actions.index("move egg 1 to sinkbasin 1")
    leave = len(trace.actions) - 1
    for step in (put_down, leave):
        assert "object_held" not in {e.atom_id for e in trace.edges if e.step == step
                                     and e.relation in ("write", "reveal")}
    # the egg "held" is bound to (egg 1, taken back, never placed): its put-down writes
    # nothing, its two takes write "held" (holds turning true)
    trace = play(TAKEN_BACK).trace
    writes = [trace.actions[e.step] for e in trace.edges
              if e.atom_id == "object_held" and e.relation == "write"]
    assert writes == ["take egg 1 from countertop 2", "take egg 1 from countertop 1"]
