"""``agentcredit conformance NAME``: one line per check, status 0 when the estimator conforms,
1 when a check fails, 2 (one ``error:`` line) for a name that is not registered."""

from __future__ import annotations

import dataclasses

from agentcredit.cli import main
from agentcredit.credit import CreditResult, registry
from agentcredit.credit.registry import register_estimator


def test_conformance_of_rloo_prints_every_check_ok(capsys):
    assert main(["conformance", "rloo"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == ["ok   finite_and_shaped", "ok   declared_inputs", "ok   deterministic",
                       "ok   sign"]
    assert "ok   turn_baseline" in out
    assert out[-1] == "rloo: conforms (9 checks, 0 failures)"


def test_conformance_takes_the_estimators_options(capsys):
    assert main(["conformance", "grpo", "credit.options.norm_by_std=false"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "grpo: conforms (9 checks, 0 failures)"


def test_a_failing_estimator_exits_1_naming_the_check(monkeypatch, capsys):
    monkeypatch.setattr(registry, "_ESTIMATORS", dict(registry._ESTIMATORS))

    @dataclasses.dataclass(frozen=True)
    class LastConfig:
        pass

    @register_estimator("last_only", LastConfig, claims=("step_credit",))
    def last_only(batch, config):
        last = batch.step_index == batch.episode_lengths[batch.step_rollout] - 1
        return CreditResult(step_advantages=last * (batch.returns - 0.5)[batch.step_rollout])

    assert main(["conformance", "last_only"]) == 1
    out = capsys.readouterr().out
    assert "FAIL step_credit [mixed]: rollout" in out
    assert out.splitlines()[-1].startswith("last_only: FAILS (5 checks, ")


def test_an_estimator_with_its_sign_flipped_exits_1_naming_the_sign_check(monkeypatch, capsys):
    monkeypatch.setattr(registry, "_ESTIMATORS", dict(registry._ESTIMATORS))
    grpo = registry.get_estimator("grpo")

    @register_estimator("grpo_flipped", grpo.config_cls,
                        claims=("step_credit", "constant_group_zero", "permutation"))
    def grpo_flipped(batch, config):
        return CreditResult(step_advantages=-grpo(batch, config).step_advantages)

    assert main(["conformance", "grpo_flipped"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert {line.split(" [")[0] for line in out if line.startswith("FAIL")} == {"FAIL sign"}
    assert out[-1] == "grpo_flipped: FAILS (7 checks, 2 failures)"  # both sign cases


def test_a_waived_check_is_printed_with_its_reason(capsys):
    assert main(["conformance", "random_edges"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[3].startswith("skip sign: waived, a control whose shuffled edges")


def test_an_unknown_estimator_is_one_error_line_with_status_2(capsys):
    assert main(["conformance", "grop"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown estimator 'grop'; registered: adrs, ") and "\n" not in err
