"""Which scoring passes an update makes (``train/scoring/passes.py``), for hand-picked configs
against hand-listed sets, and the run context that refuses a reference model the passes do not
name."""

from __future__ import annotations

import pytest

from agentcredit.config import load_config
from agentcredit.train.scoring.passes import PASSES, scoring_passes
from agentcredit.train.update import RunContext

#: the embedded preset scores nothing again: no KL (``optim.kl_coef: 0``) and the sampling
#: log-probs as ``ℓ^b`` (``optim.recompute_old_logprobs: false``)
CASES = [
    (["method=grpo"], set()),
    (["method=grpo", "optim.kl_coef=0.01"], {"reference"}),
    (["method=grpo", "optim.recompute_old_logprobs=true"], {"behaviour"}),
    (["method=adrs"], {"teacher"}),
    (["method=adrs", "credit.options.gate=L1"], {"teacher", "reference"}),
    (["method=rlsd"], {"teacher"}),
    (["method=opsd"], {"teacher"}),
    (["method=hcapo"], {"hindsight"}),
    (["method=vict"], {"traces"}),
    (["method=vict", "optim.kl_coef=0.01", "optim.recompute_old_logprobs=true"],
     {"traces", "reference", "behaviour"}),
]


@pytest.mark.parametrize(("overrides", "expected"), CASES, ids=[" ".join(o) for o, _ in CASES])
def test_each_config_makes_exactly_the_passes_its_method_and_settings_need(overrides, expected):
    assert scoring_passes(load_config(None, overrides)) == frozenset(expected)


def test_every_pass_chosen_is_a_known_pass():
    chosen = set().union(*(scoring_passes(load_config(None, o)) for o, _ in CASES))
    assert chosen == set(PASSES)


def _context(passes: set[str], reference) -> RunContext:
    return RunContext(config=load_config(None), passes=frozenset(passes), tokenizer=None,
                      reference=reference, batches=None, estimator=None, credit_options=None,
                      inputs=None)


def test_a_run_context_refuses_a_reference_model_its_passes_do_not_name():
    with pytest.raises(ValueError, match="a reference model but passes = \\[\\]"):
        _context(set(), reference=object())
    with pytest.raises(ValueError, match="no reference model but passes = \\['reference'\\]"):
        _context({"reference"}, reference=None)
    assert _context({"reference"}, reference=object()).passes == {"reference"}
