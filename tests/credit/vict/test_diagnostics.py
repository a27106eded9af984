import math
import random

import pytest
import torch

from agentcredit.credit import CreditBatch, get_estimator
from agentcredit.credit.vict import (
    ABSTAIN_REASONS,
    VICTConfig,
    format_audit_table,
    interface_audit,
)
from agentcredit.credit.vict.diagnostics import (
    fact_abstention,
    irreversibility_breaks,
    whole_group_ties,
)
from agentcredit.credit.vict.ledger import LEDGER_FIELDS
from agentcredit.credit.vict.method import OUTCOMES, RolloutCredit
from agentcredit.jsonl_log import JsonlLog, read_jsonl
from agentcredit.verifier.aggregators import ConjunctiveAggregator
from agentcredit.verifier.atoms import Atom, Status, Verifier
from agentcredit.verifier.trace import trace_rollout

from .synthetic import synthetic_group


def _batch(num_groups=4, liar=False, seed=0):
    rng = random.Random(seed)
    traces, groups = [], []
    for g in range(num_groups):
        traces += synthetic_group(f"task{g}", 8, 6, 15, rng, liar=liar and g == 0)
        groups += [g] * 8
    rewards = [[0.0] * (t.num_steps - 1) + [10.0 * t.v_score] for t in traces]
    return CreditBatch.from_lists(rewards, groups, traces=traces)


def test_update_diagnostics_are_finite_floats_consistent_with_the_corrections():
    batch = _batch()
    result = get_estimator("vict")(batch, VICTConfig())
    diagnostics = result.diagnostics
    assert all(isinstance(v, float) and math.isfinite(v) for v in diagnostics.values())
    shares = [diagnostics[f"vict/{'abstain' if o in ABSTAIN_REASONS else 'outcome'}/{o}_pct"]
              for o in OUTCOMES]
    assert sum(shares) == pytest.approx(100.0)
    assert diagnostics["vict/abstain_pct"] == pytest.approx(
        sum(diagnostics[f"vict/abstain/{r}_pct"] for r in ABSTAIN_REASONS))
    nonzero = result.extras["correction"] != 0
    assert diagnostics["vict/sparsity_pct"] == pytest.approx(100 * nonzero.double().mean().item())
    assert diagnostics["vict/nonzero_steps_per_rollout"] == pytest.approx(
        nonzero.sum().item() / batch.num_rollouts)
    assert diagnostics["vict/eligibility_pass_pct"] == 100.0
    assert diagnostics["vict/atoms_per_task"] == 6.0 and diagnostics["vict/credit_ms"] > 0
    assert "base/mean_abs_advantage" in diagnostics


def test_proof_coverage_counts_nonzero_marginal_atoms_with_a_valid_edge():
    batch = _batch()
    marginal = proven = 0
    for trace in batch.traces:
        edged = {e.atom_id for e in trace.edges if e.valid}
        for atom_id, delta in zip(trace.atom_ids, trace.delta, strict=True):
            marginal += delta != 0
            proven += delta != 0 and atom_id in edged
    diagnostics = get_estimator("vict")(batch, VICTConfig()).diagnostics
    assert 0 < proven < marginal
    assert diagnostics["vict/proof_coverage_pct"] == pytest.approx(100 * proven / marginal)


def test_controls_report_how_many_of_their_credits_a_proof_would_back():
    batch = _batch()
    spread = get_estimator("no_proof_edges")(batch, VICTConfig()).diagnostics
    assert spread["vict/eligibility_pass_pct"] < 100.0


def test_the_interface_audit_flags_a_verifier_that_disagrees_with_the_environment():
    honest = interface_audit(_batch().traces)
    liar = interface_audit(_batch(liar=True).traces)
    assert honest.reconstruction_pct == 100.0 and honest.mutation_pct == 100.0
    assert liar.reconstruction_pct < 100.0
    assert dict(liar.abstain_by_reason)["non_conforming"] == 25.0  # one task of four
    shares = [share for _, share in liar.abstain_by_reason]
    assert shares == sorted(shares, reverse=True)
    assert liar.eligibility_pass_pct == 100.0 and liar.tasks == 4 and liar.rollouts == 32
    table = format_audit_table({"random": honest, "liar": liar})
    lines = table.splitlines()
    assert lines[0].startswith("| rollouts | n | atoms/task") and len(lines) == 4
    assert lines[3].startswith("| liar | 32 | 6.0 | 75.0 |")
    # then abstention per fact and the whole-group ties, the Level-0/1/2 mix, irreversible %
    # and breaks: synthetic atoms declare none
    assert lines[3].endswith(
        f"| {liar.top_abstention_reason} | {liar.abstain_fact_pct:.1f} | {liar.top_fact_reason} "
        f"| {liar.tie_group_pct:.1f} | 0.0 | 0.0 | 0.0 | 0.0 | 0 |")


def _has(var):
    return lambda s, e: Status.SAT if s.get(var) or e.get(var) else Status.UNSAT


def _flagged_trace(held_again: bool):
    """Four hand-made atoms: ``seen`` (Level 2, lasting evidence, irreversible), ``held``
    (Level 0, flagged irreversible although a put-down undoes it), ``placed`` (Level 0) and
    ``priced`` (Level 1). The rollout takes, puts down (``held`` SAT → UNSAT) and, with
    ``held_again``, takes again."""
    atoms = (Atom("seen", _has("seen:x"), "on_evidence", (), ("seen:x",), "prerequisite",
                  irreversible=True, level=2),
             Atom("held", _has("held"), "online", (), ("held",), "prerequisite",
                  irreversible=True, level=0),
             Atom("placed", _has("in"), "online", (), ("in",), "hard", level=0),
             Atom("priced", _has("ok"), "online", (), ("ok",), "hard", level=1))
    verifier = Verifier("flags", atoms, ConjunctiveAggregator.from_atoms(atoms),
                        lambda s: float(bool(s.get("in") and s.get("ok"))),
                        is_commit=lambda a: False, commit_scope=lambda a: (),
                        extract_evidence=lambda text, state: {"seen:x": True} if "x" in text
                        else {})
    snapshots = [{}, {"held": True}, {}] + ([{"held": True}] if held_again else [])
    observations = ["start", "you see x", "ok"] + (["ok"] if held_again else [])
    actions = ["take x", "put x"] + (["take x"] if held_again else [])
    return trace_rollout(verifier, observations, snapshots, actions)


def test_the_audit_reports_the_level_mix_and_every_rollout_that_breaks_an_irreversible_flag():
    once, twice = _flagged_trace(False), _flagged_trace(True)
    # held: SAT after the take, UNSAT after the put-down: the flag is broken in both rollouts;
    # seen stays SAT from step 1 on. SAT → UNSAT → SAT is still a break.
    assert irreversibility_breaks(once) == irreversibility_breaks(twice) == ("held",)
    row = interface_audit([once, twice])
    # one task, four atoms: Level 0 = {held, placed}, 1 = {priced}, 2 = {seen}; 2 flagged
    assert row.level_pct == (50.0, 25.0, 25.0) and row.irreversible_pct == 50.0
    assert row.irreversible_breaks == 2
    line = format_audit_table({"hand": row}).splitlines()[2]
    assert line.endswith("| 50.0 | 25.0 | 25.0 | 50.0 | 2 |")


def test_ledger_rows_have_the_spec_fields_and_survive_the_writer(tmp_path):
    result = get_estimator("vict")(_batch(), VICTConfig())
    assert result.ledger_rows and all(set(r) == set(LEDGER_FIELDS) for r in result.ledger_rows)
    with JsonlLog(tmp_path / "ledger.jsonl") as ledger:
        ledger.append(result.ledger_rows, update=0)
    back = list(read_jsonl(tmp_path / "ledger.jsonl"))
    assert [{k: v for k, v in r.items() if k != "update"} for r in back] == result.ledger_rows
    corrections = result.extras["correction"]
    flat = {(int(batch_rollout), int(step)) for batch_rollout, step in
            ((r["rollout"], r["step"]) for r in back)}
    assert len(flat) == int((corrections != 0).sum())
    assert torch.isfinite(corrections).all()


def _tie_batch():
    """Group 0's three rollouts all score 0 (the whole group tied); group 1 scores 10, 5, 0,
    so its middle rollout alone sits at the mean (GRPO's A^base_i = 0, q_i = 0)."""
    rng = random.Random(3)
    traces = synthetic_group("tied", 3, 6, 15, rng) + synthetic_group("mixed", 3, 6, 15, rng)
    finals = [0.0, 0.0, 0.0, 10.0, 5.0, 0.0]
    rewards = [[0.0] * (t.num_steps - 1) + [r] for t, r in zip(traces, finals, strict=True)]
    return CreditBatch.from_lists(rewards, [0, 0, 0, 1, 1, 1], traces=traces)


def test_whole_group_ties_are_counted_apart_from_a_rollout_alone_at_its_group_median():
    diagnostics = get_estimator("vict")(_tie_batch(), VICTConfig()).diagnostics
    assert diagnostics["vict/abstain/tie_pct"] == pytest.approx(100 * 4 / 6)  # 3 + the median
    assert diagnostics["vict/abstain_tie_group_pct"] == pytest.approx(100 * 3 / 6)


def test_corrected_share_is_the_scaled_correction_over_the_base_advantage_mass():
    batch = _batch()
    final = get_estimator("vict")(batch, VICTConfig())
    base = get_estimator("grpo")(batch, VICTConfig().backbone).step_advantages.double()
    share = (final.step_advantages.double() - base).abs().sum() / base.abs().sum()
    assert final.diagnostics["vict/corrected_share"] == pytest.approx(float(share))
    assert final.diagnostics["vict/corrected_share"] > 0


# TABLE 12 READ THE PAPER'S WAY (docs/vict.md §4.9)

def _hand_batch():
    """Two atoms: ``held`` (prerequisite) and ``placed`` (hard, needs ``held``); ``V`` = placed.
    Group 0 (one task): A takes then places (wins), B takes then looks, C and D only look.
    Group 1: E takes then looks, F only looks; both fail, so the whole group ties.

    Worked by hand with mean centring (docs/vict.md §4.5; ``std`` the population std):
    group 0: held 1,1,0,0 → mean 0.5, std 0.5, δ̂ = ±1; placed 1,0,0,0 → δ̂ A > 0, others < 0.
    Cores (docs/vict.md §4.4): A (q = +1): held and placed tie at Δ = 1, both picked, no
    closure. B, C, D (q = −1): only fixing ``placed`` gains (Δ = 1); its closure adds ``held``:
    picked 1, closure 1. Core sizes 2, 2, 2, 2 → mean 2, picked 1.25, closure 0.75.
    Witnesses: A: take writes held, move writes placed; B: take writes held, nothing writes
    placed; C, D: nothing. So A has 2 corrected steps, B 1 (its take), C, D abstain no_edge.
    """
    atoms = (Atom("held", _has("held"), "online", (), ("held",), "prerequisite"),
             Atom("placed", _has("in"), "online", ("held",), ("in",), "hard"))
    verifier = Verifier("hand", atoms, ConjunctiveAggregator.from_atoms(atoms),
                        lambda s: float(bool(s.get("in"))), is_commit=lambda a: False,
                        commit_scope=lambda a: (), extract_evidence=lambda text, state: {})
    plays = {"take+place": [{"held": True}, {"held": True, "in": True}],
             "take+look": [{"held": True}, {"held": True}],
             "look+look": [{}, {}]}
    actions = {"take+place": ["take x", "move x"], "take+look": ["take x", "look"],
               "look+look": ["look", "look"]}
    names = ["take+place", "take+look", "look+look", "look+look", "take+look", "look+look"]
    traces = [trace_rollout(verifier, ["start", "ok", "ok"], [{}, *plays[n]], actions[n])
              for n in names]
    rewards = [[0.0, 10.0 * t.v_score] for t in traces]
    return CreditBatch.from_lists(rewards, [0, 0, 0, 0, 1, 1], traces=traces)


def test_table12_reads_abstention_per_fact_actions_per_triggered_rollout_and_the_core_split():
    diagnostics = get_estimator("vict")(_hand_batch(), VICTConfig(centre="mean")).diagnostics
    # facts: 2 atoms with δ̂ ≠ 0 in each of A, B, C, D's cores = 8; E and F (a whole-group tie)
    # are left out. No witness: B's placed, C's two, D's two = 5 → 62.5%, all no_edge
    assert diagnostics["vict/abstain_fact_pct"] == pytest.approx(62.5)
    assert diagnostics["vict/abstain_fact/no_edge_pct"] == pytest.approx(62.5)
    assert diagnostics["vict/abstain_fact/tie_pct"] == 0.0
    assert diagnostics["vict/abstain_tie_group_pct"] == pytest.approx(100 * 2 / 6)
    # the old figure counts rollouts: C and D (no_edge), E and F (tie) of 6
    assert diagnostics["vict/abstain_pct"] == pytest.approx(100 * 4 / 6)
    # 3 corrected steps: over all 6 rollouts 0.5, over the 2 triggered ones (A, B) 1.5
    assert diagnostics["vict/nonzero_steps_per_rollout"] == pytest.approx(0.5)
    assert diagnostics["vict/nonzero_steps_per_triggered"] == pytest.approx(1.5)
    assert diagnostics["vict/core_size_mean"] == pytest.approx(2.0)
    assert diagnostics["vict/core_picked_mean"] == pytest.approx(1.25)
    assert diagnostics["vict/core_closure_mean"] == pytest.approx(0.75)


def test_the_audit_ranks_the_reasons_facts_abstained_and_reports_whole_group_ties_apart():
    row = interface_audit(_hand_batch().traces, [0, 0, 0, 0, 1, 1], VICTConfig(centre="mean"))
    assert row.abstain_fact_pct == pytest.approx(62.5)
    assert row.abstain_fact_by_reason == (("no_edge", pytest.approx(62.5)),)
    assert row.top_fact_reason == "no_edge" and row.top_abstention_reason == "tie"
    assert row.tie_group_pct == pytest.approx(100 * 2 / 6)
    line = format_audit_table({"hand": row}).splitlines()[2]
    assert "| tie | 62.5 | no_edge | 33.3 |" in line


def _decided(rollout, group, direction, outcome, delta, core=(), unproven=()):
    return RolloutCredit(rollout, group, direction, 0.5, outcome, frozenset(core), 1,
                         dict(zip("abcd", delta, strict=True)), tuple(unproven))


def test_facts_are_core_atoms_with_a_marginal_or_every_marginal_of_a_rollout_without_a_core():
    rollouts = [
        # group 0 has directions: its tie is a rollout alone at the median
        _decided(0, 0, 1, "credited", (0.5, 0.0, -1.0, 2.0), "abc", [("c", "terminal_only")]),
        _decided(1, 0, -1, "budget", (1.0, 0.0, 0.3, 0.0)),
        _decided(2, 0, 0, "tie", (-1.0, 1.0, 0.0, 0.0)),
        # group 1: every rollout tied, left out whatever its marginals
        _decided(3, 1, 0, "tie", (1.0, 1.0, 1.0, 1.0)),
        _decided(4, 1, 0, "tie", (-1.0, -1.0, -1.0, -1.0)),
        _decided(5, 2, 1, "non_conforming", (0.2, -0.2, 0.0, 0.0)),
        _decided(6, 2, -1, "no_edge", (0.4, 0.1, 0.0, 0.0), "ab",
                 [("a", "no_edge"), ("b", "no_edge")]),
        _decided(7, 2, 1, "zero_marginal", (0.0, 0.0, 1.0, 1.0), "b"),
        _decided(8, 2, 1, "credited", (1.0, 1.0, 1.0, 1.0), "abcd"),
    ]
    tied = whole_group_ties(rollouts)
    assert tied == [False, False, False, True, True, False, False, False, False]
    facts, abstained = fact_abstention(rollouts, tied)
    # facts: 0: a, c (d is outside the core, b has δ̂ = 0); 1: a, c; 2: a, b; 5: a, b;
    # 6: a, b; 7: none (its core atom has δ̂ = 0); 8: a, b, c, d → 2+2+2+2+2+0+4 = 14
    assert facts == 14
    assert abstained == {"terminal_only": 1, "budget": 2, "tie": 2, "non_conforming": 2,
                         "no_edge": 2}
