"""The auxiliary-loss registry (docs/adrs.md §5.6): every baseline's loss is registered with the
teacher as its input, defaults are the ADRS authors', and the registered function passes its
arguments through."""

from __future__ import annotations

import pytest
import torch

from agentcredit.config import load_config
from agentcredit.credit import self_distillation
from agentcredit.credit.aux_losses import aux_loss_names, get_aux_loss, register_aux_loss
from agentcredit.credit.self_distillation import opsd_loss, sdar_loss, skill_sd_loss

STUDENT = torch.tensor([[-1.0, -2.0, -0.5]])
TEACHER = torch.tensor([[-1.5, -1.0, -0.4]])
BEHAVIOUR = torch.tensor([[-1.0, -2.5, -0.6]])
MASK = torch.tensor([[1, 1, 0]])
NORMALIZER = torch.tensor(4.0)


def test_every_baseline_loss_is_registered_and_needs_the_teacher():
    assert {"opsd", "sdar", "skill_sd"} <= set(aux_loss_names())
    assert all(get_aux_loss(name).needs == frozenset({"teacher"})
               for name in ("opsd", "sdar", "skill_sd"))


@pytest.mark.parametrize(("name", "direct"), [
    ("opsd", lambda: opsd_loss(STUDENT, TEACHER, MASK, 0.3, normalizer=NORMALIZER)),
    ("sdar", lambda: sdar_loss(STUDENT, TEACHER, BEHAVIOUR, MASK, 0.3, normalizer=NORMALIZER)),
    ("skill_sd", lambda: skill_sd_loss(STUDENT, TEACHER, BEHAVIOUR, MASK, 0.3,
                                       normalizer=NORMALIZER)),
])
def test_the_registered_loss_passes_behaviour_weight_and_normalizer_through(name, direct):
    loss, stats = get_aux_loss(name).fn(STUDENT, TEACHER, BEHAVIOUR, MASK, 0.3, NORMALIZER)
    expected, expected_stats = direct()
    assert loss.item() == pytest.approx(expected.item()) and stats == expected_stats


def test_the_defaults_are_the_adrs_authors_weights_and_gate_slope():
    assert (self_distillation.OPSD_BETA, self_distillation.SDAR_TAU,
            self_distillation.SKILL_SD_BETA) == (0.01, 5.0, 0.1)
    # SDAR's gate uses slope 5: sigmoid(5 · (−1 − (−1.5))) on a single token
    student, teacher, behaviour = (torch.tensor([[x]]) for x in (-1.0, -1.0, -1.5))
    _, stats = sdar_loss(student, teacher, behaviour, torch.ones(1, 1))
    assert stats["sdar_gate_mean"] == pytest.approx(torch.sigmoid(torch.tensor(2.5)).item())
    coefs = {m: load_config(None, [f"method={m}"]).optim.aux_coef
             for m in ("opsd", "sdar", "skill_sd", "opsd_only")}
    assert coefs == {"opsd": 0.01, "sdar": 0.01, "skill_sd": 0.1, "opsd_only": 0.01}


def test_the_baseline_presets_select_their_loss_estimator_and_policy_gradient():
    def preset(method):
        c = load_config(None, [f"method={method}"])
        return (c.credit.estimator, c.optim.aux_loss, c.optim.pg_coef, c.run.updates > 0,
                c.uses_teacher)
    assert preset("opsd_only") == ("grpo", "opsd", 0.0, True, True)
    assert preset("skill_sd") == ("grpo", "skill_sd", 1.0, True, True)
    assert preset("rlsd") == ("rlsd", "none", 1.0, True, True)
    assert preset("vanilla") == ("grpo", "none", 1.0, False, False)


def test_a_duplicate_or_unknown_name_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        register_aux_loss("opsd", needs=("teacher",))(lambda *a: None)
    with pytest.raises(KeyError, match="known: .*skill_sd"):
        get_aux_loss("skilsd")
