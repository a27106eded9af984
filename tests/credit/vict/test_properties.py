"""Property tests (docs/vict.md §4.4-4.8) over random groups of synthetic rollouts and atom
timelines."""

import random
from collections import defaultdict

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcredit.credit import CreditBatch, get_estimator
from agentcredit.credit.vict import VICTConfig, compute_credit
from agentcredit.credit.vict.ablations import RULES

from .synthetic import synthetic_group

SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def batches(draw, liars=False, equal_rewards=False):
    """A batch of 1-3 synthetic task groups; ``liars`` makes some tasks non-conforming."""
    rng = random.Random(draw(st.integers(0, 2 ** 32 - 1)))
    num_atoms, num_steps = draw(st.integers(1, 8)), draw(st.integers(1, 12))
    activity = draw(st.sampled_from([0.2, 0.5, 0.9]))
    traces, groups, liar_groups = [], [], set()
    for g in range(draw(st.integers(1, 3))):
        liar = liars and draw(st.booleans())
        liar_groups |= {g} if liar else set()
        size = draw(st.integers(2, 8))
        traces += synthetic_group(f"task{g}", size, num_atoms, num_steps, rng, liar=liar,
                                  activity=activity)
        groups += [g] * size
    rewards = []
    for t in traces:
        steps = [-0.1 if rng.random() < 0.1 and not equal_rewards else 0.0
                 for _ in range(t.num_steps)]
        steps[-1] += 0.0 if equal_rewards else 10.0 * t.v_score
        rewards.append(steps)
    backbone = draw(st.sampled_from(["grpo", "rloo", "gigpo"]))
    batch = CreditBatch.from_lists(rewards, groups, traces=traces)
    return batch, VICTConfig(backbone=backbone), liar_groups


def _atom_totals(computation):
    totals = defaultdict(float)
    for c in computation.contributions:
        totals[c.rollout, c.atom_id] += c.amount
    return totals


@SETTINGS
@given(batches(liars=True))
def test_vict_never_credits_a_step_without_a_proof_edge(case):
    batch, config, _ = case
    result = get_estimator("vict")(batch, config)  # raises EligibilityError on a violation
    computation = compute_credit(batch, config)
    conforming = computation.conforming
    rows_at = defaultdict(list)
    for row in result.ledger_rows:
        rows_at[row["rollout"], row["step"]].append(row)
    nonzero = torch.nonzero(result.extras["correction"]).flatten().tolist()
    assert len(rows_at) == len(nonzero)
    for s in nonzero:
        i, t = int(batch.step_rollout[s]), int(batch.step_index[s])
        assert conforming[i] and rows_at[i, t]
        credit = computation.rollouts[i]
        for row in rows_at[i, t]:
            assert row["atom_id"] in credit.core and row["delta_hat"] != 0
            assert any(e.step == t and e.atom_id == row["atom_id"] and e.valid and e.weight > 0
                       for e in batch.traces[i].edges)
    assert result.diagnostics["vict/eligibility_pass_pct"] == 100.0


@SETTINGS
@given(batches(liars=True))
def test_non_conforming_tasks_get_no_correction(case):
    batch, config, liar_groups = case
    computation = compute_credit(batch, config)
    for i, g in enumerate(batch.group_ids.tolist()):
        if g in liar_groups:
            assert computation.rollouts[i].outcome == "non_conforming"
            assert not computation.correction[batch.step_rollout == i].any()


@SETTINGS
@given(batches())
def test_each_atoms_credit_over_its_edges_sums_to_its_normalised_marginal(case):
    batch, config, _ = case
    computation = compute_credit(batch, config)
    for (i, atom_id), total in _atom_totals(computation).items():
        credit = computation.rollouts[i]
        assert atom_id in credit.core and credit.delta_hat[atom_id] != 0
        assert total == pytest.approx(credit.delta_hat[atom_id], rel=1e-9, abs=1e-12)


@SETTINGS
@given(batches())
def test_the_final_advantage_is_the_base_plus_a_clipped_scaled_correction(case):
    batch, config, _ = case
    computation = compute_credit(batch, config)
    bound = computation.lam * computation.clip
    assert torch.equal(computation.final, computation.base + computation.correction)
    assert (computation.correction.abs() <= bound * (1 + 1e-6) + 1e-12).all()
    signs = torch.sign(computation.correction.double()) * torch.sign(computation.vict)
    assert (signs[computation.correction != 0] > 0).all()


@SETTINGS
@given(batches(equal_rewards=True))
def test_groups_with_equal_rewards_get_no_correction(case):
    batch, config, _ = case
    computation = compute_credit(batch, config)
    assert not computation.correction.any()
    assert {r.outcome for r in computation.rollouts} <= {"tie", "non_conforming"}


@SETTINGS
@given(batches(), st.sampled_from(sorted(RULES)))
def test_ablations_differ_from_vict_only_in_which_steps_receive_credit(case, name):
    batch, config, _ = case
    vict = compute_credit(batch, config)
    ablation = compute_credit(batch, config, RULES[name])
    assert torch.equal(vict.base, ablation.base)
    for ours, theirs in zip(vict.rollouts, ablation.rollouts, strict=True):
        assert ours.delta_hat == theirs.delta_hat  # same atoms, same marginals
        if name != "no_core":
            assert ours.core == theirs.core and ours.direction == theirs.direction
    tied = {r.rollout for r in ablation.rollouts if r.direction == 0}
    assert not [c for c in ablation.contributions if c.rollout in tied]  # no sign, no credit
    if name == "random_edges":  # the placebo deals the group's credited steps across it
        for i in range(batch.num_rollouts):  # credited steps, not non-zero sums: under mean
            # centring two atoms of opposite sign can cancel on one step
            ours = {c.step for c in vict.contributions if c.rollout == i}
            theirs = {c.step for c in ablation.contributions if c.rollout == i}
            assert len(ours) == len(theirs)
        step_group = batch.group_index[batch.step_rollout]
        for g in range(batch.num_groups):
            assert torch.sort(vict.vict[step_group == g]).values.tolist() == pytest.approx(
                torch.sort(ablation.vict[step_group == g]).values.tolist())
        return
    for (i, atom_id), total in _atom_totals(ablation).items():
        credit = ablation.rollouts[i]
        assert atom_id in credit.core and credit.delta_hat[atom_id] != 0
        assert total == pytest.approx(credit.delta_hat[atom_id], rel=1e-9, abs=1e-12)
