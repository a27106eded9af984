"""The docs/vict.md §4.8 controls on the case-study group: same atoms, different credited steps."""

from dataclasses import replace

import pytest
import torch

from agentcredit.credit import CreditBatch, get_estimator
from agentcredit.credit.vict import ABLATIONS, VICTConfig, compute_credit
from agentcredit.credit.vict.ablations import RULES
from agentcredit.verifier.aggregators import ConjunctiveAggregator
from agentcredit.verifier.atoms import Atom, Status, Verifier
from agentcredit.verifier.trace import trace_rollout


@pytest.fixture(scope="module")
def mixed(group_batch, case):
    return group_batch(case.mixed)


def _credited(batch, result, rollout):
    steps = (batch.step_rollout == rollout).nonzero().flatten()
    return [batch.traces[rollout].actions[t] for t, s in enumerate(steps)
            if result.extras["correction"][s] != 0]


def test_every_control_is_a_registered_estimator_taking_the_vict_config(mixed):
    for name in ABLATIONS:
        result = get_estimator(name)(mixed, VICTConfig())
        assert result.step_advantages.shape == (mixed.num_steps,)
        assert all(row["method"] == name for row in result.ledger_rows)


def test_commit_only_credits_the_success_only_at_its_final_move(mixed, case):
    result = get_estimator("commit_only")(mixed, VICTConfig())
    assert _credited(mixed, result, case.mixed.index(case.success)) == [
        "move egg 1 to countertop 1"]


def test_temporal_nearest_credits_the_nearest_mention_before_each_atom_settles(mixed, case):
    result = get_estimator("temporal_nearest")(mixed, VICTConfig())
    # object_held settles at the take (step 3), transformation at the heat (6), final_placement
    # at the move (8), each step naming the egg. commit_only credits the move alone.
    assert _credited(mixed, result, case.mixed.index(case.success)) == [
        "take egg 1 from countertop 2", "heat egg 1 with microwave 1",
        "move egg 1 to countertop 1"]
    commit = get_estimator("commit_only")(mixed, VICTConfig())
    assert not torch.equal(result.step_advantages, commit.step_advantages)
    assert {r["relation"] for r in result.ledger_rows} == {"nearest"}


def test_no_proof_edges_spreads_credit_over_every_step_including_the_loop(mixed, case):
    result = get_estimator("no_proof_edges")(mixed, VICTConfig())
    looping = case.mixed.index(case.looping)
    assert _credited(mixed, result, looping) == list(case.looping)


def test_no_core_keeps_the_direction_so_a_tied_group_abstains(group_batch, case):
    equal = group_batch(case.failed)  # equal rewards: every q_i = 0
    computed = compute_credit(equal, VICTConfig(), RULES["no_core"])
    assert not computed.contributions
    assert {r.outcome for r in computed.rollouts} == {"tie"}


def test_no_core_credits_every_nonzero_marginal_of_a_rollout_with_a_direction(mixed, case):
    computed = compute_credit(mixed, VICTConfig(), RULES["no_core"])
    wrong = case.mixed.index(case.wrong_take)
    # mean centring: every atom on which the potato rollout differs from its group's average
    # (held by 4 of 8, heated by 2, placed by 2, premature and misplaced in one other rollout,
    # the wrong take its own); no one placed a wrong object, so that atom is constant
    assert [r.core for r in computed.rollouts][wrong] == {
        "object_held", "transformation", "final_placement", "premature_placement",
        "target_misplaced", "wrong_object_held"}
    # only the wrong take has a witness in this rollout (its reveal and violation)
    assert {(c.step, c.atom_id) for c in computed.contributions if c.rollout == wrong} == {
        (2, "wrong_object_held")}


def _credited_counts(computed, num_rollouts):
    return [len({c.step for c in computed.contributions if c.rollout == i})
            for i in range(num_rollouts)]


def test_random_edges_deals_credit_across_the_group_fresh_every_update(mixed):
    vict = compute_credit(mixed, VICTConfig())
    placebo = compute_credit(mixed, VICTConfig(seed=1), RULES["random_edges"])
    # VICT credits the success's reveal, take, two support walks, heat and move; the potato
    # take; the premature rollout's reveal, take, walk and move; the sink rollout's six steps;
    # the looping rollout's reveal and take; none of the wanderers
    assert _credited_counts(vict, 8) == [6, 1, 4, 6, 2, 0, 0, 0]
    assert _credited_counts(placebo, 8) == [6, 1, 4, 6, 2, 0, 0, 0]
    assert sum(c.amount for c in placebo.contributions) == pytest.approx(
        sum(c.amount for c in vict.contributions))
    moved = {c.sources[0] for c in placebo.contributions
             if not c.sources[0].startswith(f"placebo: edge of rollout {c.rollout} ")}
    assert moved, "no credit crossed to another rollout of the group"
    again = compute_credit(mixed, VICTConfig(seed=1), RULES["random_edges"])
    assert torch.equal(placebo.vict, again.vict)
    # the next update's batch: same rollouts, the collector's next group id
    next_update = replace(mixed, group_ids=mixed.group_ids + 1)
    fresh = compute_credit(next_update, VICTConfig(seed=1), RULES["random_edges"])
    assert not torch.equal(placebo.vict, fresh.vict)


def test_dense_atom_reward_pays_each_atom_where_it_turns_sat_or_violated(mixed, case):
    result = get_estimator("dense_atom_reward")(mixed, VICTConfig())
    success = case.mixed.index(case.success)
    events = {(r["step"], r["atom_id"]) for r in result.ledger_rows if r["rollout"] == success}
    assert events == {(3, "object_held"), (6, "transformation"), (8, "final_placement")}
    premature = [r for r in result.ledger_rows if r["rollout"] == case.mixed.index(case.premature)
                 and r["atom_id"] == "premature_placement"]
    assert [(r["step"], r["atom_credit"]) for r in premature] == [(3, -1.0)]


def _flag(var):
    return lambda s, e: Status.SAT if s.get(var) else Status.UNSAT


def _breach(var):
    return lambda s, e: Status.VIOL if s.get(var) else Status.UNSAT


@pytest.fixture(scope="module")
def flip_group():
    """One task, two rollouts: rollout 0 sets ``a`` (SAT), clears it, sets it again and wins
    (step rewards 0, 0, 1); rollout 1 breaks rule ``p`` (VIOL) and stops (0, 0)."""
    atoms = (Atom("a", _flag("a"), "online", (), ("a",), "hard"),
             Atom("p", _breach("p"), "online", (), ("p",), "penalty"))
    verifier = Verifier(
        task_id="flip", atoms=atoms, aggregate=ConjunctiveAggregator.from_atoms(atoms),
        original=lambda s: float(bool(s.get("a")) and not s.get("p")),
        is_commit=lambda act: False, commit_scope=lambda act: (),
        extract_evidence=lambda text, state: {}, mutations={}, env="synthetic")
    won = trace_rollout(verifier, ["o"] * 4, [{}, {"a": True}, {"a": False}, {"a": True}],
                        ["set a", "clear a", "set a"])
    broke = trace_rollout(verifier, ["o"] * 3, [{}, {"p": True}, {"p": True}],
                          ["break p", "wait"])
    return CreditBatch.from_lists([[0.0, 0.0, 1.0], [0.0, 0.0]], [7, 7], traces=[won, broke])


def test_dense_atom_reward_is_a_normalised_return_to_go_paying_each_atom_once(flip_group):
    result = get_estimator("dense_atom_reward")(flip_group, VICTConfig())
    # atom rewards: a turns SAT at step 0 (+1), its second SAT at step 2 earns nothing; p turns
    # VIOL at step 0 of rollout 1 (−1). Shaped rewards [1, 0, 1] and [−1, 0]; return-to-go
    # [2, 1, 1] and [−1, 0]; group mean 0.6, population std sqrt(1.04).
    assert result.extras["atom_reward"].tolist() == [1.0, 0.0, 0.0, -1.0, 0.0]
    assert result.extras["return_to_go"].tolist() == [2.0, 1.0, 1.0, -1.0, 0.0]
    std = 1.04 ** 0.5 + 1e-6
    expected = [1.4 / std, 0.4 / std, 0.4 / std, -1.6 / std, -0.6 / std]
    assert result.step_advantages.tolist() == pytest.approx(expected)


def test_dense_atom_reward_is_dense_under_every_backbone(flip_group):
    for backbone in ("grpo", "rloo", "gigpo"):
        result = get_estimator("dense_atom_reward")(flip_group,
                                                    VICTConfig(backbone=backbone))
        first = result.step_advantages[:3]
        assert first[0] != first[1], backbone
