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
    assert out[:3] == ["ok   finite_and_shaped", "ok   declared_inputs", "ok   deterministic"]
    assert "ok   turn_baseline" in out
    assert out[-1] == "rloo: conforms (8 checks, 0 failures)"


def test_conformance_takes_the_estimators_options(capsys):
    assert main(["conformance", "grpo", "credit.options.norm_by_std=false"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "grpo: conforms (8 checks, 0 failures)"


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
    assert out.splitlines()[-1].startswith("last_only: FAILS (4 checks, ")


def test_an_unknown_estimator_is_one_error_line_with_status_2(capsys):
    assert main(["conformance", "grop"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown estimator 'grop'; registered: adrs, ") and "\n" not in err
