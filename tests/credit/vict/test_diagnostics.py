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
from agentcredit.credit.vict.diagnostics import irreversibility_breaks
from agentcredit.credit.vict.ledger import LEDGER_FIELDS
from agentcredit.credit.vict.method import OUTCOMES
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
    # then the Level-0/1/2 mix, irreversible % and breaks: synthetic atoms declare none
    assert lines[3].endswith(f"| {liar.top_abstention_reason} | 0.0 | 0.0 | 0.0 | 0.0 | 0 |")


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
