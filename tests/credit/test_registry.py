import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch

from agentcredit.credit import (
    CreditBatch,
    CreditResult,
    estimator_names,
    get_estimator,
    register_estimator,
    registry,
)
from agentcredit.credit.aux_losses import register_aux_loss
from agentcredit.credit.grpo import GRPOConfig
from agentcredit.credit.rloo import RLOOConfig
from agentcredit.plugins import NameCollision

BACKBONES = ("grpo", "rloo", "gigpo")


#: every estimator the package registers, with the inputs it declares (docs/design.md)
REGISTERED = {
    "grpo": [], "rloo": [], "gigpo": [], "salt": [], "proxmo": [],
    "vict": ["traces"], "dense_atom_reward": ["traces"], "hcapo": ["hindsight"],
    "adrs": ["teacher"], "rlsd": ["teacher"],
    **{control: ["traces"] for control in
       ("commit_only", "temporal_nearest", "random_edges", "no_core", "no_proof_edges")},
}


def test_a_fresh_import_of_agentcredit_credit_registers_every_estimator_with_its_inputs():
    # a new interpreter: this test module's own imports must not be what registers them
    code = ("import json, agentcredit.credit as c; from agentcredit.credit import registry; "
            "print(json.dumps({n: sorted(registry.get_estimator(n).needs) "
            "for n in c.estimator_names()}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert json.loads(out.stdout) == REGISTERED


def test_unknown_estimator_name_fails_listing_the_known_names():
    with pytest.raises(KeyError, match="unknown estimator 'grop'; known estimators: .*grpo"):
        get_estimator("grop")


def test_registering_an_existing_name_again_fails_naming_both_providers():
    with pytest.raises(NameCollision) as err:
        register_estimator("grpo", GRPOConfig)(lambda batch, config: None)
    assert str(err.value) == (
        "estimator 'grpo' is registered twice: first by agentcredit's built-in "
        "agentcredit.credit.grpo.grpo, then by module tests.credit.test_registry."
        "test_registering_an_existing_name_again_fails_naming_both_providers.<locals>.<lambda>; "
        "rename the second one's estimator (its register_estimator('grpo', ...) call) and "
        "select it with credit.estimator=NEW_NAME")


def test_a_built_in_estimator_missing_from_the_torch_free_name_list_is_refused(monkeypatch):
    monkeypatch.setattr(registry, "_ESTIMATORS", dict(registry._ESTIMATORS))
    monkeypatch.setattr(registry, "provider", lambda fn: "agentcredit's built-in x.unlisted")
    with pytest.raises(ValueError, match="'unlisted' is not in plugins.BUILTIN_ESTIMATORS"):
        register_estimator("unlisted", GRPOConfig)(lambda batch, config: None)
    assert "unlisted" not in registry._ESTIMATORS


def test_register_estimator_rejects_a_config_that_is_not_a_dataclass():
    with pytest.raises(TypeError, match="config_cls must be a dataclass type"):
        register_estimator("no_config", dict)


def test_registered_function_is_returned_unchanged_and_found_by_name(monkeypatch):
    monkeypatch.setattr(registry, "_ESTIMATORS", {})

    @dataclasses.dataclass(frozen=True)
    class ZeroConfig:
        pass

    @register_estimator("zero", ZeroConfig)
    def zero(batch, config):
        return CreditResult(step_advantages=torch.zeros(batch.num_steps))

    estimator = get_estimator("zero")
    assert estimator.fn is zero and estimator.config_cls is ZeroConfig
    assert estimator_names() == ["zero"]


def test_calling_an_estimator_with_another_estimators_config_fails():
    batch = CreditBatch.from_lists([[1.0], [0.0]], [0, 0])
    with pytest.raises(TypeError, match="'rloo' takes a RLOOConfig; got GRPOConfig"):
        get_estimator("rloo")(batch, GRPOConfig())
    assert isinstance(get_estimator("rloo")(batch, RLOOConfig()), CreditResult)


@pytest.mark.parametrize("name", BACKBONES)
def test_every_backbone_gives_zero_advantage_when_all_rollouts_earn_the_same_rewards(name):
    # identical per-step rewards (so equal returns and equal return-to-go), shared anchors
    rewards = [[-0.1, 0.1, 0.1]] * 4 + [[0.0, 1.0]] * 3
    keys = [["s0", "s1", "s2"]] * 4 + [["s0", "s1"]] * 3
    batch = CreditBatch.from_lists(rewards, [0, 0, 0, 0, 1, 1, 1], keys)
    assert torch.equal(get_estimator(name)(batch).step_advantages, torch.zeros(batch.num_steps))


@pytest.mark.parametrize("name", BACKBONES)
def test_every_backbone_returns_one_finite_detached_advantage_per_step(name):
    batch = CreditBatch.from_lists([[0.0, 10.0], [-0.1], [0.0, 0.0, 1.0]], [0, 0, 5],
                                   [["a", "b"], ["a"], ["a", "b", "c"]])
    result = get_estimator(name)(batch)
    assert result.step_advantages.shape == (batch.num_steps,)
    assert torch.isfinite(result.step_advantages).all()
    assert not result.step_advantages.requires_grad
    assert result.token_advantages is None and result.ledger_rows == []


def test_registering_an_estimator_that_needs_an_unknown_input_fails_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"needs unknown inputs \['logits'\]; choose from traces"):
        register_estimator("needs_logits", GRPOConfig, needs=("logits",))


def test_the_reference_input_is_refused_without_the_teacher_it_travels_with():
    with pytest.raises(ValueError, match="needs 'reference' without 'teacher'"):
        register_estimator("ref_only", GRPOConfig, needs=("reference",))
    with pytest.raises(ValueError, match="needs 'reference' without 'teacher'"):
        register_aux_loss("ref_only_loss", needs=("reference",))
