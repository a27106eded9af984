"""The learning benchmark says which run it is on (position, method and seed) as each run
begins and ends, and tries a run again after an OSError such as a full disk."""

from __future__ import annotations

import pytest

import learning_alfworld


def test_each_run_names_its_position_method_and_seed_as_it_begins_and_ends(monkeypatch, capsys):
    monkeypatch.setattr(learning_alfworld, "run_method", lambda *args: [{"kind": "update"}])
    records = learning_alfworld.run_with_retries("start", "vict/grpo",
                                                 ["run.seed=0", "run.seed=3"], "vict-grpo_seed3",
                                                 "4/30")
    assert records == [{"kind": "update"}]
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "run 4/30: vict/grpo, seed 3 ..."
    assert lines[1].startswith("run 4/30: vict/grpo, seed 3 done in ") and lines[1].endswith(" s")


def test_a_run_is_tried_again_after_an_oserror_and_the_last_failure_is_raised(monkeypatch):
    calls = []

    def full_disk(*args):
        calls.append(args)
        raise OSError("No space left on device")

    monkeypatch.setattr(learning_alfworld, "run_method", full_disk)
    monkeypatch.setattr(learning_alfworld, "RETRY_WAIT_S", 0)
    with pytest.raises(OSError, match="No space left"):
        learning_alfworld.run_with_retries("start", "grpo", ["run.seed=1"], "grpo_seed1", "1/2")
    assert len(calls) == learning_alfworld.RETRIES + 1


def test_a_run_that_fails_once_is_finished_by_its_retry(monkeypatch):
    outcomes = iter([OSError("disk full"), [{"kind": "eval"}]])

    def flaky(*args):
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(learning_alfworld, "run_method", flaky)
    monkeypatch.setattr(learning_alfworld, "RETRY_WAIT_S", 0)
    assert learning_alfworld.run_with_retries("start", "grpo", ["run.seed=1"], "grpo_seed1",
                                              "1/2") == [{"kind": "eval"}]
