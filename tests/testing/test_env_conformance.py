"""The environment conformance checks pass the test suite's corridor and name, with the field
and the rule, each defect a plug-in can ship: a suite without a method, a malformed observation,
a reward outside [0, 1], a verifier atom that is never evaluated. ``agentcredit conformance
--env`` prints them (status 1; 2 for a usage error) and ``agentcredit train`` refuses such an
environment with one ``error:`` line before anything is built."""

from __future__ import annotations

import dataclasses

import pytest

from agentcredit.cli import main
from agentcredit.envs import suites
from agentcredit.envs.base import Observation
from agentcredit.envs.suites import register_environment
from agentcredit.testing.env_conformance import (
    CHECKS,
    PROTOCOL_METHODS,
    SUITE_METHODS,
    assert_environment_conforms,
    check_environment,
)
from agentcredit.verifier.atoms import Atom, Status
from agentcredit.verifier.goal import Goal, goal_verifier

from ..conftest import FakeEnv, FakeSuite
from ..corridor import corridor_verifier


class NoFactorySuite:
    """The corridor's suite without ``make_env``."""

    splits = FakeSuite.splits
    validation_splits = FakeSuite.validation_splits

    def __init__(self, options=None, games=None) -> None:
        self.tasks = FakeSuite(options, games).tasks


class ListActionsEnv(FakeEnv):
    """Answers every step with its admissible actions as a list."""

    def step(self, action_text):
        obs, reward, done, info = super().step(action_text)
        return Observation(obs.text, list(obs.admissible_actions)), reward, done, info


class TenfoldRewardEnv(FakeEnv):
    """Rewards a win with 10, the trainer's outcome scale, instead of 1."""

    def step(self, action_text):
        obs, reward, done, info = super().step(action_text)
        return obs, 10 * reward, done, info


class MisspeltGoalEnv(FakeEnv):
    """A Level-0 goal whose second variable is misspelt (``rooom``)."""

    def verifier(self, task):
        initial = {"room": task.payload["start"], "won": False}
        return goal_verifier(task.task_id, Goal(equal={"won": True,
                                                       "rooom": task.payload["apple"]}),
                             initial, env="fake")


class UnscopedCommitEnv(FakeEnv):
    """An ``on_commit`` atom that no commit's scope names, and a scope naming a typo."""

    def verifier(self, task):
        verifier = corridor_verifier(task)
        bagged = Atom("apple_bagged", lambda s, e: Status.SAT, "on_commit", (), ("won",),
                      "hard")
        return dataclasses.replace(
            verifier, atoms=(*verifier.atoms, bagged),
            commit_scope=lambda a: ("apple_taken", "apple_tkaen") if a == "take apple" else ())


def suite_of(env_class):
    class Suite(FakeSuite):
        def make_env(self):
            return env_class()

    return Suite


@pytest.fixture
def own_registry(monkeypatch):
    monkeypatch.setattr(suites, "_SPECS", dict(suites._SPECS))
    monkeypatch.setattr(suites, "_PROVIDERS", dict(suites._PROVIDERS))


def report(suite):
    return check_environment("corridor", lambda: suite())


def test_the_checker_knows_every_member_of_the_protocol_and_the_suite_contract():
    from agentcredit.envs.base import Environment
    from agentcredit.envs.suites import EnvSuite

    def members(protocol):
        return {n for n in vars(protocol) if not n.startswith("_")} | \
            set(protocol.__annotations__)

    assert members(Environment) == {"name", *PROTOCOL_METHODS}
    assert members(EnvSuite) == {"splits", "validation_splits", *SUITE_METHODS}


def test_the_corridor_passes_every_check():
    checked = report(FakeSuite)
    assert checked.tasks == ("train-0", "train-1")
    assert checked.lines() == [f"ok   {check}" for check in CHECKS]


def test_a_suite_without_make_env_fails_the_suite_check_and_plays_nothing():
    checked = report(NoFactorySuite)
    assert checked.tasks == () and not checked.ok
    assert checked.lines() == [
        ("FAIL suite [suite]: make_env() is missing; rule: the suite defines make_env "
         "(EnvSuite.make_env)"),
        "skip environment: not run: the suite gives no instance (see suite)",
        *(f"skip {check}: not run: the suite gives no train task or no instance (see suite)"
          for check in CHECKS[2:])]


def test_admissible_actions_given_as_a_list_are_a_malformed_observation():
    (problem,) = report(suite_of(ListActionsEnv)).problems
    # the first step played is the bad action of train-0
    assert str(problem) == ("observation [train-0]: step('').admissible_actions is a list "
                            "(['go right']); rule: a tuple of str (envs/base.py, "
                            "Observation.admissible_actions)")


def test_a_reward_on_the_trainers_scale_is_outside_the_declared_range():
    assert_environment_conforms("corridor", FakeSuite)  # passes silently
    with pytest.raises(AssertionError, match=r"FAIL reward \[train-0, expert step 1\]"):
        assert_environment_conforms("corridor", suite_of(TenfoldRewardEnv))
    (problem,) = report(suite_of(TenfoldRewardEnv)).problems
    # train-0: start in room 0, apple in room 1; the expert's second action wins
    assert str(problem) == ("reward [train-0, expert step 1]: step('take apple')'s reward is 10.0; "
                            "rule: a finite number in [0, 1] (Environment.step; the trainer "
                            "scales it, docs/backbones.md §2)")


def test_a_misspelt_goal_variable_is_an_atom_the_state_never_satisfies():
    problems = report(suite_of(MisspeltGoalEnv)).problems
    assert [(p.check, p.where, p.field) for p in problems] == [
        ("verifier", "train-0", "the state_vars of atom 'equal:rooom'")]
    assert problems[0].found == "name ['rooom'], in no snapshot or evidence played"


def test_an_on_commit_atom_no_scope_names_is_never_evaluated():
    problems = report(suite_of(UnscopedCommitEnv)).problems
    assert [(p.check, p.field, p.found) for p in problems] == [
        ("verifier", "commit_scope('take apple')",
         "names ['apple_tkaen'], not atoms of the verifier"),
        ("verifier", "atom 'apple_bagged' (on_commit)",
         "is UNK at every step of the expert's play")]


def test_a_bad_action_that_moves_the_agent_breaks_the_bad_action_rule():
    class Slippery(FakeEnv):
        def step(self, action_text):
            if action_text == "":
                self.room = (self.room + 1) % self.task.payload["size"]
                return (Observation(self._text(), self.admissible_actions()), 0.0, False,
                        type(super().step("go nowhere")[3])(valid=False, won=False))
            return super().step(action_text)

    (problem,) = report(suite_of(Slippery)).problems
    assert (problem.check, problem.field, problem.found) == (
        "bad_action", "step('')", "changed the snapshot or the admissible actions")


def test_an_expert_that_stops_short_is_reported():
    class Short(FakeEnv):
        def expert(self, task):
            return super().expert(task)[:-1]

    (problem,) = report(suite_of(Short)).problems
    assert (problem.check, problem.where, problem.field) == (
        "expert", "train-0", "info.won after the plan's last action")


DEFECTS = {"no_factory": NoFactorySuite, "list_actions": suite_of(ListActionsEnv),
           "tenfold_reward": suite_of(TenfoldRewardEnv),
           "misspelt_goal": suite_of(MisspeltGoalEnv)}
FIRST = {"no_factory": "suite [suite]: make_env() is missing",
         "list_actions": "observation [train-0]: step('').admissible_actions is a list",
         "tenfold_reward": "reward [train-0, expert step 1]: step('take apple')'s reward is 10.0",
         "misspelt_goal": "verifier [train-0]: the state_vars of atom 'equal:rooom'"}


@pytest.mark.parametrize("defect", DEFECTS)
def test_conformance_env_prints_the_problem_and_exits_1(defect, own_registry, capsys):
    register_environment(defect, DEFECTS[defect])
    assert main(["conformance", "--env", defect]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "played train tasks " + ("(none)" if defect == "no_factory"
                                              else "train-0, train-1")
    assert out[1 + CHECKS.index(FIRST[defect].split()[0])].startswith(f"FAIL {FIRST[defect]}")
    assert out[-1].startswith(f"{defect}: FAILS (7 checks, ")


@pytest.mark.parametrize("defect", DEFECTS)
def test_train_refuses_the_environment_in_one_line_before_anything_runs(
        defect, own_registry, tiny_fake_run, tmp_path, capsys):  # 1-3 s each
    register_environment(defect, DEFECTS[defect])
    status = main(["train", *tiny_fake_run, f"env={defect}", f"run.output_dir={tmp_path}"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in err
    assert err.startswith(f"error: environment {defect!r} breaks the environment protocol: "
                          f"{FIRST[defect]}")
    assert err.endswith(f"agentcredit conformance --env {defect} lists every problem; fix the "
                        "plug-in or choose another env=NAME")
    assert list(tmp_path.iterdir()) == []  # no run directory: no SFT, no model


def test_conformance_env_usage_errors_exit_2(capsys):
    assert main(["conformance", "grpo", "--env", "alfworld"]) == 2
    assert main(["conformance"]) == 2
    assert main(["conformance", "--env", "alfwrold"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == err[1] == ("error: conformance checks an estimator (conformance NAME) or an "
                                "environment (conformance --env NAME): give exactly one of them")
    assert err[2].startswith("error: unknown environment 'alfwrold'; registered: alfworld, ")


def test_train_does_not_replay_a_built_in_environment_at_start_up(monkeypatch):
    from agentcredit.config import load_config
    from agentcredit.envs.suites import AlfWorldSuite
    from agentcredit.testing.env_conformance import refuse_nonconforming_environment

    def generate(self, split):
        raise AssertionError("the start-up check generated ALFWorld games")

    monkeypatch.setattr(AlfWorldSuite, "tasks", generate)
    refuse_nonconforming_environment(load_config(None, ["env=alfworld"]).env)
