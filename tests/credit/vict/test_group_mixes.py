"""VICT on one hand-built heat task at three success mixes, checked against numbers worked out
by hand from docs/vict.md §4.4-4.6 (not from the pipeline's own outputs): under the paper's
literal median centring (``MEDIAN``), and under the default mean centring.

Atoms: ``held`` (prerequisite, reads ``held``), ``hot`` (hard, needs ``held``, reads ``hot``),
``placed`` (hard, needs ``held``, reads ``in``); ``F = hot ∧ placed``. Rollouts of three steps:
``S`` take, heat, place (wins); ``P`` take, heat, look; ``N`` look ×3. Reward 1 on the last step
of a win; GRPO backbone (population std, ε = 1e-6).
"""

import math

import pytest
import torch

from agentcredit.credit import CreditBatch
from agentcredit.credit.vict import VICTConfig, compute_credit
from agentcredit.verifier.aggregators import ConjunctiveAggregator
from agentcredit.verifier.atoms import Atom, Status, Verifier
from agentcredit.verifier.trace import trace_rollout

EPS = 1e-6
MAD_SCALE = 1.4826
MEDIAN = VICTConfig(centre="median")


def _has(var):
    return lambda s, e: Status.SAT if s.get(var) else Status.UNSAT


ATOMS = (Atom("held", _has("held"), "online", (), ("held",), "prerequisite"),
         Atom("hot", _has("hot"), "online", ("held",), ("hot",), "hard"),
         Atom("placed", _has("in"), "online", ("held",), ("in",), "hard"))
VERIFIER = Verifier("heat", ATOMS, ConjunctiveAggregator.from_atoms(ATOMS),
                    lambda s: float(bool(s.get("hot") and s.get("in"))),
                    is_commit=lambda a: False, commit_scope=lambda a: (),
                    extract_evidence=lambda text, state: {})
STEPS = {"take": "held", "heat": "hot", "place": "in", "look": None}
PLAYS = {"S": ("take", "heat", "place"), "P": ("take", "heat", "look"),
         "N": ("look", "look", "look")}


def _trace(kind):
    state, snapshots = {}, [{}]
    for action in PLAYS[kind]:
        if STEPS[action]:
            state = {**state, STEPS[action]: True}
        snapshots.append(dict(state))
    return trace_rollout(VERIFIER, ["start"] * 4, snapshots, PLAYS[kind])


def _batch(groups):
    traces, rewards, ids = [], [], []
    for g, kinds in enumerate(groups):
        for kind in kinds:
            traces.append(_trace(kind))
            rewards.append([0.0, 0.0, float(kind == "S")])
            ids.append(g)
    return CreditBatch.from_lists(rewards, ids, traces=traces, dtype=torch.float64)


def _corrections(batch, computation, group=0):
    """Per rollout of ``group``: its three final corrections."""
    rows = (batch.group_index == group).nonzero().flatten().tolist()
    return [computation.correction[batch.step_rollout == i].tolist() for i in rows]


# hand-worked normalised marginals: median-centred, MAD (×1.4826) or else population std
SPLIT = 0.5 / (MAD_SCALE * 0.5 + EPS)  # 4 of 8 reach the atom: |δ̂| = 0.67449
ONE_OF_8 = 1.0 / (math.sqrt(7) / 8 + EPS)  # 1 of 8: std √7/8, δ̂ = 3.0237
TWO_OF_8 = 1.0 / (math.sqrt(3) / 4 + EPS)  # 2 of 8 (or 6 of 8 missing it): 2.3094


def test_one_success_in_eight_credits_its_writes_and_the_near_miss_take():
    batch = _batch(["SPPPNNNN"])
    computation = compute_credit(batch, MEDIAN)
    # A^base: success (7/8)/(√7/8 + ε) = 2.6458, failures −(1/8)/(√7/8 + ε) = −0.3780
    fail = (1 / 8) / (math.sqrt(7) / 8 + EPS)
    win = (7 / 8) / (math.sqrt(7) / 8 + EPS)
    # λ: median|A^base| over 24 steps (21 at 0.378) / median of {SPLIT ×5, ONE_OF_8} = SPLIT
    lam = 0.5 * fail / (SPLIT + EPS)
    clip = win  # 0.95-quantile of 21 × 0.378, 3 × 2.646
    assert computation.lam == pytest.approx(lam) and computation.clip == pytest.approx(clip)
    got = _corrections(batch, computation)
    assert got[0] == pytest.approx([lam * SPLIT, lam * SPLIT, lam * min(ONE_OF_8, clip)])
    for near_miss in got[1:4]:  # core {placed, held}: only held has δ̂ ≠ 0, written by take
        assert near_miss == pytest.approx([lam * SPLIT, 0.0, 0.0])
    assert got[4:] == [[0.0] * 3] * 4  # core of every atom, no witness: abstains
    assert [r.outcome for r in computation.rollouts[4:]] == ["no_edge"] * 4


def test_two_successes_in_eight_clip_the_placement_at_the_base_quantile():
    batch = _batch(["SSPPNNNN"])
    computation = compute_credit(batch, MEDIAN)
    fail = 0.25 / (math.sqrt(3) / 4 + EPS)
    win = 0.75 / (math.sqrt(3) / 4 + EPS)
    lam = 0.5 * fail / (SPLIT + EPS)
    assert computation.lam == pytest.approx(lam) and computation.clip == pytest.approx(win)
    got = _corrections(batch, computation)
    for success in got[:2]:
        assert success == pytest.approx([lam * SPLIT, lam * SPLIT, lam * min(TWO_OF_8, win)])
    for near_miss in got[2:4]:
        assert near_miss == pytest.approx([lam * SPLIT, 0.0, 0.0])
    assert got[4:] == [[0.0] * 3] * 4


def test_four_successes_in_eight_credit_only_the_placement_the_majority_missed():
    batch = _batch(["SSSSPPNN"])
    computation = compute_credit(batch, MEDIAN)
    # held and hot: 6 of 8, median 1 → δ̂ = 0 for S and P; placed: 4 of 8 → ±SPLIT
    lam = 0.5 * 1.0 / (SPLIT + EPS)  # A^base = ±1 everywhere (mean 0.5, std 0.5)
    assert computation.lam == pytest.approx(lam, rel=1e-5)
    assert computation.clip == pytest.approx(1.0, rel=1e-5)
    got = _corrections(batch, computation)
    for success in got[:4]:
        assert success == pytest.approx([0.0, 0.0, lam * SPLIT], rel=1e-5)
    assert got[4:] == [[0.0] * 3] * 4  # P: placed has δ̂ < 0 but no write; N: no witness


@pytest.mark.parametrize("mix", ["SPPPNNNN", "SSPPNNNN", "SSSSPPNN"])
def test_adding_groups_without_signal_leaves_a_groups_credit_unchanged(mix):
    alone = _batch([mix])
    crowded = _batch([mix, "NNNNNNNN", "PPPPPPPP", "SSSSSSSS", "NNNNPPPP", "NNNNNNNN"])
    reference = [c for row in _corrections(alone, compute_credit(alone, VICTConfig()))
                 for c in row]
    got = [c for row in _corrections(crowded, compute_credit(crowded, VICTConfig())) for c in row]
    assert got == pytest.approx(reference) and any(reference)


def test_mean_centring_credits_the_near_misses_take_on_a_failed_rollout():
    """``SPPPNNNN`` under the default mean centring. ``held`` and ``hot``: 4 of 8, mean 0.5,
    std 0.5, so δ̂ = ±0.5/(0.5 + ε) ≈ ±1; ``placed``: 1 of 8, δ̂ = 7/√7 for S and
    −(1/8)/(√7/8) for the rest. S (q = +1): every SAT atom is decisive, core = all three:
    [take, heat, place] = [1, 1, 7/√7]. P (q = −1): core {placed} with its closure {held};
    held's δ̂ ≈ +1 sits on the take, placed has no witness: [1, 0, 0] — a failed rollout
    credited for its useful step. N: core {placed, held}, no witness. λ = 0.5 · 0.378 /
    median{1 ×5, 2.6458} = 0.5 · 0.378 / 1; c = 2.6458 as under the median."""
    batch = _batch(["SPPPNNNN"])
    computation = compute_credit(batch, VICTConfig())
    half = 0.5 / (0.5 + EPS)
    one_of_8 = (7 / 8) / (math.sqrt(7) / 8 + EPS)
    fail = (1 / 8) / (math.sqrt(7) / 8 + EPS)
    lam = 0.5 * fail / (half + EPS)
    assert computation.lam == pytest.approx(lam) and computation.clip == pytest.approx(one_of_8)
    got = _corrections(batch, computation)
    assert got[0] == pytest.approx([lam * half, lam * half, lam * one_of_8])
    for near_miss in got[1:4]:
        assert near_miss == pytest.approx([lam * half, 0.0, 0.0])
    assert got[4:] == [[0.0] * 3] * 4
