"""The conformance checks for an environment (docs/extending.md, "Check an environment").

An environment that breaks the protocol (``envs/base.py``) or the suite contract
(``envs/suites.py``, ``EnvSuite``) fails far from its cause: a missing suite method as an
``AttributeError`` in the middle of setup, a malformed observation inside the prompt builder,
a reward outside [0, 1] as an outcome reward on another scale, an atom that is never evaluated
as credit that never reaches the steps it should. ``check_environment`` plays a few short
episodes of the first ``TASKS`` train tasks and reports every problem with the field it
found and the rule that field breaks (``CHECKS``, in order):

- ``suite``: ``splits`` (a non-empty tuple of str with ``train``), ``validation_splits`` (a
  tuple of splits), ``tasks(split)`` and ``make_env()``; ``tasks("train")`` is a non-empty
  list of tasks with ``task_id``, ``instruction`` and ``task_type`` strings (ids unique) and a
  dict ``payload``;
- ``environment``: the instance has a str ``name`` and the methods ``reset``, ``step``,
  ``admissible_actions``, ``snapshot``, ``verifier`` and ``expert``;
- ``observation``: ``reset`` and ``step`` return an observation whose ``text`` is a str and
  ``admissible_actions`` a tuple of str, equal to ``admissible_actions()`` in the new state;
  ``step`` returns ``(observation, reward, done, info)`` with a bool ``done``, bool
  ``info.valid`` and ``info.won`` and a dict ``info.metrics`` of finite numbers;
  ``snapshot()`` is a dict with str keys;
- ``reward``: every reward is a finite number in ``REWARD_RANGE`` = [0, 1];
- ``bad_action``: ``step("")`` is answered (never raised) with ``info.valid = False`` and
  leaves the snapshot and the admissible actions unchanged;
- ``expert``: ``expert(task)`` is a list of str; played from ``reset``, every action is valid,
  the episode does not end before the last one, and ``info.won`` is true after it;
- ``verifier``: ``verifier(task)``, on an instance that never reset (the trainer builds
  verifiers so), is a ``Verifier`` whose atoms are all evaluated: each has a status other
  than UNK at some step of the expert's play (an ``on_commit`` atom is named by the
  ``commit_scope`` of a commit the expert makes), each hard atom reads at least one variable
  (``Atom.state_vars``, a guard's variable too) that some snapshot or evidence of the
  episodes holds (a misspelt variable is never there), and ``commit_scope`` names only the
  verifier's atoms. A penalty or graded atom may read variables no good play shows (a wrong
  object held, a page never opened), so only hard atoms are held to the variables.

Bounded: at most ``TASKS`` tasks, each reset three times and stepped at most
``1 + MAX_PLAN + RANDOM_STEPS`` times, so the trainer runs it at start-up
(``refuse_nonconforming_environment``) on every environment a plug-in registers; the
built-ins are held by their own tests and checked on demand with ``agentcredit conformance
--env NAME``. The checks read the suite and its instances through their attributes only: this
module imports no environment, it plays the one it is given.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

from agentcredit.config.schema import ConfigError
from agentcredit.verifier.atoms import Status, Verifier
from agentcredit.verifier.reconstruction import evidence_timeline
from agentcredit.verifier.trace import split_guard, trace_rollout

#: the checks, in the order they run and print
CHECKS = ("suite", "environment", "observation", "reward", "bad_action", "expert", "verifier")
#: train tasks played
TASKS = 2
#: expert actions played at most per task
MAX_PLAN = 100
#: random admissible actions played per task after the expert's play
RANDOM_STEPS = 8
#: the range of a step's reward (``Environment.step``, docs/backbones.md §2)
REWARD_RANGE = (0.0, 1.0)
#: the methods of the environment protocol (``envs/base.py``, ``Environment``)
PROTOCOL_METHODS = ("reset", "step", "admissible_actions", "snapshot", "verifier", "expert")
#: the methods of the suite contract (``envs/suites.py``, ``EnvSuite``)
SUITE_METHODS = ("tasks", "make_env")


@dataclass(frozen=True)
class Problem:
    """One broken rule: which check, where it showed, the field, what it held, the rule."""

    check: str
    where: str
    field: str
    found: str
    rule: str

    def __str__(self) -> str:
        return f"{self.check} [{self.where}]: {self.field} {self.found}; rule: {self.rule}"


@dataclass(frozen=True)
class EnvironmentReport:
    """What ``check_environment`` found.

    Attributes:
        environment: the environment's name.
        tasks: the ids of the train tasks played.
        problems: one ``Problem`` per broken rule (the first place it showed).
        skipped: the checks that could not run, each with the reason.
    """

    environment: str
    tasks: tuple[str, ...]
    problems: tuple[Problem, ...]
    skipped: Mapping[str, str] = field(default_factory=dict)

    @property
    def checks(self) -> tuple[str, ...]:
        """Every check, in order (``CHECKS``)."""
        return CHECKS

    @property
    def failures(self) -> tuple[Problem, ...]:
        """The problems, under the name ``check_estimator``'s report gives its own."""
        return self.problems

    @property
    def ok(self) -> bool:
        """Whether every check ran and passed."""
        return not self.problems and not self.skipped

    def lines(self) -> list[str]:
        """One line per check: ``ok   NAME``, ``FAIL NAME [where]: ...`` or ``skip NAME: why``."""
        out = []
        for check in CHECKS:
            if check in self.skipped:
                out.append(f"skip {check}: {self.skipped[check]}")
                continue
            failed = [p for p in self.problems if p.check == check]
            out += [f"FAIL {p}" for p in failed] or [f"ok   {check}"]
        return out


def check_environment(name: str, build_suite: Callable[[], Any], *, seed: int = 0
                      ) -> EnvironmentReport:
    """Run the checks (module docstring) on the suite ``build_suite()`` returns (the run
    config's ``env.build_suite``, so the environment's own options apply); ``seed`` draws the
    random actions."""
    probe = _Probe()
    tasks, env, fresh = _suite(probe, build_suite)
    skipped: dict[str, str] = {}
    if env is not None:
        _environment(probe, env)
    else:
        skipped["environment"] = "not run: the suite gives no instance (see suite)"
    blocked = _blocked(tasks, env)
    skipped.update({check: blocked for check in CHECKS[2:] if blocked})
    if not blocked:
        if not callable(getattr(env, "expert", None)):
            skipped["expert"] = "not run: the environment has no expert method"
        if not callable(getattr(fresh, "verifier", None)):
            skipped["verifier"] = "not run: the environment has no verifier method"
        for task in tasks:
            _play(probe, env, fresh, task, seed, skipped)
    played = () if blocked else tuple(task.task_id for task in tasks)
    return EnvironmentReport(name, played, tuple(probe.problems), skipped)


def assert_environment_conforms(name: str, build_suite: Callable[[], Any], *, seed: int = 0
                                ) -> None:
    """Raise ``AssertionError`` listing every problem ``check_environment`` finds (for
    pytest)."""
    report = check_environment(name, build_suite, seed=seed)
    if not report.ok:
        raise AssertionError(f"environment {name!r} fails the conformance checks:\n"
                             + "\n".join(report.lines()))


def refuse_nonconforming_environment(env: Any) -> None:
    """Refuse the run's environment (``config.env``: its ``name`` and ``build_suite()``) when
    a plug-in registers it and it fails ``check_environment``; the trainer calls it before
    anything else is built. Built-in suites (classes of agentcredit's own modules) are not
    played: their tests hold them, and ALFWorld's games would be generated twice.

    Raises:
        ConfigError: one line, the first problem and how many more, and the command that
            lists them all.
    """
    try:
        suite = env.build_suite()
    except Exception:  # noqa: BLE001  (check_environment reports it as the suite's problem)
        suite = None
    if suite is not None and type(suite).__module__.split(".")[0] == "agentcredit":
        return
    report = check_environment(env.name, env.build_suite if suite is None else lambda: suite)
    if report.ok:
        return
    first = report.problems[0] if report.problems else None
    what = str(first) if first else next(f"{c}: {why}" for c, why in report.skipped.items())
    more = len(report.problems) - 1
    raise ConfigError(
        f"environment {env.name!r} breaks the environment protocol: {what}"
        + (f" (and {more} more problem{'s' * (more > 1)})" if more > 0 else "")
        + f"; agentcredit conformance --env {env.name} lists every problem; fix the plug-in "
          "or choose another env=NAME")


# THE PROBE: what was found, each broken rule kept once (where it first showed)


class _Probe:
    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self._seen: set[tuple[str, str, str]] = set()

    def fail(self, check: str, where: str, field_: str, found: str, rule: str) -> None:
        # one problem per field and rule, whatever the action that showed it
        key = (check, _ACTION.sub("step(…)", field_), rule)
        if key not in self._seen:
            self._seen.add(key)
            self.problems.append(Problem(check, where, field_, found, rule))


#: the action inside ``step('...')`` (its repr)
_ACTION = re.compile(r"""step\((?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\)""")


def _show(value: Any) -> str:
    """A value in one short line."""
    text = " ".join(repr(value).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    return f"a {type(value).__name__} ({_show(value)})"


def _raised(error: BaseException) -> str:
    first = (str(error).strip().splitlines() or [""])[0][:120]
    return f"raised {type(error).__name__}: {first}"


def _strings(value: Any) -> bool:
    return isinstance(value, tuple) and all(isinstance(v, str) for v in value)


def _number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


# SUITE AND INSTANCE


def _suite(probe: _Probe, build_suite: Callable[[], Any]) -> tuple[list, Any, Any]:
    """``(tasks played, an instance to play, a fresh instance for verifiers)``; empty and
    ``None`` where the suite cannot give them."""
    rule_splits = "a non-empty tuple of str that holds 'train' (EnvSuite.splits)"
    try:
        suite = build_suite()
    except Exception as error:  # noqa: BLE001  (a crash is a finding)
        probe.fail("suite", "suite", "suite(options, games)", _raised(error),
                   "the suite class is built from the environment's options and a "
                   "GamesPerType (EnvironmentSpec.suite)")
        return [], None, None
    splits = getattr(suite, "splits", None)
    if not (_strings(splits) and "train" in splits):
        probe.fail("suite", "suite", "splits", "is missing" if splits is None
                   else f"is {_kind(splits)}", rule_splits)
    validation = getattr(suite, "validation_splits", None)
    if not (_strings(validation) and set(validation) <= set(splits or ())):
        probe.fail("suite", "suite", "validation_splits", "is missing" if validation is None
                   else f"is {_kind(validation)}",
                   "a tuple of the suite's splits (EnvSuite.validation_splits)")
    for method in SUITE_METHODS:
        if not callable(getattr(suite, method, None)):
            probe.fail("suite", "suite", f"{method}()", "is missing",
                       f"the suite defines {method} (EnvSuite.{method})")
    tasks = _train_tasks(probe, suite) if callable(getattr(suite, "tasks", None)) else []
    env = fresh = None
    if callable(getattr(suite, "make_env", None)):
        try:
            env, fresh = suite.make_env(), suite.make_env()
        except Exception as error:  # noqa: BLE001
            probe.fail("suite", "suite", "make_env()", _raised(error),
                       "make_env() returns a new environment instance (EnvSuite.make_env)")
    return tasks[:TASKS], env, fresh


def _train_tasks(probe: _Probe, suite: Any) -> list:
    try:
        tasks = suite.tasks("train")
    except Exception as error:  # noqa: BLE001
        probe.fail("suite", "suite", "tasks('train')", _raised(error),
                   "tasks(split) returns the split's tasks (EnvSuite.tasks)")
        return []
    if not isinstance(tasks, list) or not tasks:
        probe.fail("suite", "suite", "tasks('train')", f"is {_kind(tasks)}",
                   "a non-empty list of Task (EnvSuite.tasks)")
        return []
    ids = []
    for task in tasks:
        ident = getattr(task, "task_id", None)
        where = f"task {ident!r}" if isinstance(ident, str) else "suite"
        for name in ("task_id", "instruction", "task_type"):
            value = getattr(task, name, None)
            if not isinstance(value, str):
                probe.fail("suite", where, f"Task.{name}", f"is {_kind(value)}",
                           f"a str (envs/base.py, Task.{name})")
        payload = getattr(task, "payload", None)
        if not isinstance(payload, dict):
            probe.fail("suite", where, "Task.payload", f"is {_kind(payload)}",
                       "a dict of plain values (envs/base.py, Task.payload)")
        ids.append(ident)
    repeated = sorted({str(i) for i in ids if ids.count(i) > 1})
    if repeated:
        probe.fail("suite", "suite", "Task.task_id", f"repeats {repeated[:3]} in tasks('train')",
                   "unique within an environment and split (envs/base.py, Task.task_id)")
    return tasks


def _environment(probe: _Probe, env: Any) -> None:
    where = type(env).__name__
    if not isinstance(getattr(env, "name", None), str):
        probe.fail("environment", where, "name", f"is {_kind(getattr(env, 'name', None))}",
                   "a str attribute (envs/base.py, Environment.name)")
    for method in PROTOCOL_METHODS:
        if not callable(getattr(env, method, None)):
            probe.fail("environment", where, f"{method}()", "is missing",
                       f"the environment protocol defines {method} (envs/base.py, "
                       f"Environment.{method})")


def _blocked(tasks: list, env: Any) -> str:
    """Why the episodes cannot be played ('' when they can)."""
    if env is None or not tasks:
        return "not run: the suite gives no train task or no instance (see suite)"
    if not all(callable(getattr(env, m, None)) for m in ("reset", "step", "snapshot",
                                                           "admissible_actions")):
        return "not run: the environment lacks reset, step, snapshot or admissible_actions"
    if any(not isinstance(getattr(t, "task_id", None), str) for t in tasks):
        return "not run: the tasks are malformed (see suite)"
    return ""


# PLAYING A TASK


@dataclass
class _Episode:
    """What one play of a task recorded (the trace's inputs)."""

    observations: list[str] = field(default_factory=list)
    snapshots: list[dict] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    valid: list[bool] = field(default_factory=list)
    done: bool = False
    won: bool = False
    admissible: tuple[str, ...] = ()
    broken: bool = False


def _play(probe: _Probe, env: Any, fresh: Any, task: Any, seed: int,
          skipped: dict[str, str]) -> None:
    task_id = task.task_id
    verifier = None
    if "verifier" not in skipped:
        try:
            verifier = fresh.verifier(task)
        except Exception as error:  # noqa: BLE001
            probe.fail("verifier", task_id, "verifier(task)", _raised(error),
                       "the verifier is built from the task alone, on an instance that never "
                       "reset (envs/base.py, Environment.verifier)")
        if verifier is not None and not isinstance(verifier, Verifier):
            probe.fail("verifier", task_id, "verifier(task)", f"is {_kind(verifier)}",
                       "an agentcredit.verifier.atoms.Verifier (goal_verifier builds one)")
            verifier = None
    _bad_action(probe, env, task)
    expert = None
    if "expert" not in skipped:
        expert = _expert(probe, env, task)
    random_play = _random_play(probe, env, task, seed)
    if verifier is not None:
        _verifier(probe, verifier, task_id, [e for e in (expert, random_play) if e], expert)


def _reset(probe: _Probe, env: Any, task: Any) -> _Episode | None:
    episode = _Episode()
    try:
        obs = env.reset(task)
    except Exception as error:  # noqa: BLE001
        probe.fail("observation", task.task_id, "reset(task)", _raised(error),
                   "reset starts the task from its initial state (Environment.reset)")
        return None
    if not _observation(probe, env, obs, task.task_id, "reset(task)"):
        return None
    snapshot = _snapshot(probe, env, task.task_id)
    if snapshot is None:
        return None
    episode.observations.append(obs.text)
    episode.snapshots.append(snapshot)
    episode.admissible = obs.admissible_actions
    return episode


def _observation(probe: _Probe, env: Any, obs: Any, where: str, call: str) -> bool:
    """Whether ``obs`` is a well-formed observation agreeing with ``admissible_actions()``."""
    text, actions = getattr(obs, "text", None), getattr(obs, "admissible_actions", None)
    if not isinstance(text, str):
        probe.fail("observation", where, f"{call}.text",
                   f"is {_kind(text)}" if hasattr(obs, "text") else f"is missing from {_kind(obs)}",
                   "a str (envs/base.py, Observation.text)")
        return False
    if not _strings(actions):
        probe.fail("observation", where, f"{call}.admissible_actions", f"is {_kind(actions)}",
                   "a tuple of str (envs/base.py, Observation.admissible_actions)")
        return False
    try:
        current = env.admissible_actions()
    except Exception as error:  # noqa: BLE001
        probe.fail("observation", where, "admissible_actions()", _raised(error),
                   "the actions valid in the current state (Environment.admissible_actions)")
        return False
    if not _strings(current) or tuple(current) != actions:
        probe.fail("observation", where, "admissible_actions()",
                   f"is {_kind(current)} but {call}.admissible_actions is {_show(actions)}",
                   "a tuple of str, the observation's admissible_actions in the same state")
        return False
    return True


def _snapshot(probe: _Probe, env: Any, where: str) -> dict | None:
    try:
        snapshot = env.snapshot()
    except Exception as error:  # noqa: BLE001
        probe.fail("observation", where, "snapshot()", _raised(error),
                   "the state snapshot (Environment.snapshot)")
        return None
    if not (isinstance(snapshot, dict) and all(isinstance(k, str) for k in snapshot)):
        probe.fail("observation", where, "snapshot()", f"is {_kind(snapshot)}",
                   "a flat dict variable -> value with str keys (Environment.snapshot, "
                   "docs/vict.md §4.1)")
        return None
    return snapshot


def _step(probe: _Probe, env: Any, episode: _Episode, action: str, where: str,
          check: str) -> Any:
    """Step ``action`` and check what comes back; the ``info`` (``None`` when unusable).
    ``check`` is whose rule a raise breaks."""
    call = f"step({action!r})"
    try:
        result = env.step(action)
    except Exception as error:  # noqa: BLE001
        probe.fail(check, where, call, _raised(error),
                   "a bad action is answered with valid=False, never raised (envs/base.py)"
                   if check == "bad_action" else
                   "step returns (observation, reward, done, info) (Environment.step)")
        return None
    if not (isinstance(result, tuple) and len(result) == 4):
        probe.fail("observation", where, call, f"returned {_kind(result)}",
                   "a tuple (observation, reward, done, info) (Environment.step)")
        return None
    obs, reward, done, info = result
    if not _number(reward) or not REWARD_RANGE[0] <= reward <= REWARD_RANGE[1]:
        probe.fail("reward", where, f"{call}'s reward", f"is {_show(reward)}",
                   f"a finite number in [{REWARD_RANGE[0]:g}, {REWARD_RANGE[1]:g}] "
                   "(Environment.step; the trainer scales it, docs/backbones.md §2)")
    well_formed = _observation(probe, env, obs, where, call)
    if not isinstance(done, bool):
        probe.fail("observation", where, f"{call}'s done", f"is {_kind(done)}",
                   "a bool (Environment.step)")
        well_formed = False
    for name in ("valid", "won"):
        value = getattr(info, name, None)
        if not isinstance(value, bool):
            probe.fail("observation", where, f"{call}'s info.{name}", f"is {_kind(value)}",
                       f"a bool (envs/base.py, StepInfo.{name})")
            well_formed = False
    metrics = getattr(info, "metrics", None)
    if not (isinstance(metrics, dict)
            and all(isinstance(k, str) and _number(v) for k, v in metrics.items())):
        probe.fail("observation", where, f"{call}'s info.metrics", f"is {_kind(metrics)}",
                   "a dict name -> finite number (envs/base.py, StepInfo.metrics)")
        well_formed = False
    snapshot = _snapshot(probe, env, where)
    if not well_formed or snapshot is None:
        episode.broken = True
        return None
    episode.observations.append(obs.text)
    episode.snapshots.append(snapshot)
    episode.actions.append(action)
    episode.valid.append(info.valid)
    episode.done, episode.won, episode.admissible = done, info.won, obs.admissible_actions
    return info


def _bad_action(probe: _Probe, env: Any, task: Any) -> None:
    episode = _reset(probe, env, task)
    if episode is None:
        return
    before = (episode.snapshots[0], episode.admissible)
    info = _step(probe, env, episode, "", task.task_id, "bad_action")
    if info is None:
        return
    if info.valid:
        probe.fail("bad_action", task.task_id, "step('')'s info.valid", "is True",
                   "an unparsable or inadmissible action comes back with valid=False "
                   "(envs/base.py)")
    if (episode.snapshots[-1], episode.admissible) != before:
        probe.fail("bad_action", task.task_id, "step('')",
                   "changed the snapshot or the admissible actions",
                   "a bad action leaves the state unchanged (envs/base.py)")


def _expert(probe: _Probe, env: Any, task: Any) -> _Episode | None:
    try:
        plan = env.expert(task)
    except Exception as error:  # noqa: BLE001
        probe.fail("expert", task.task_id, "expert(task)", _raised(error),
                   "an action sequence that solves the task (Environment.expert)")
        return None
    if not (isinstance(plan, list | tuple) and all(isinstance(a, str) for a in plan)):
        probe.fail("expert", task.task_id, "expert(task)", f"is {_kind(plan)}",
                   "a list of str (Environment.expert)")
        return None
    episode = _reset(probe, env, task)
    if episode is None:
        return None
    played = plan[:MAX_PLAN]
    for t, action in enumerate(played):
        where = f"{task.task_id}, expert step {t}"
        info = _step(probe, env, episode, action, where, "expert")
        if info is None:
            return None
        if not info.valid:
            probe.fail("expert", where, f"step({action!r})'s info.valid", "is False",
                       "every action of expert(task) is valid (Environment.expert)")
            return episode
        if episode.done and t < len(played) - 1:
            probe.fail("expert", where, f"step({action!r})'s done",
                       f"is True after {t + 1} of the plan's {len(plan)} actions",
                       "the episode ends at the plan's last action (Environment.expert)")
            return episode
    if len(plan) <= MAX_PLAN and not episode.won:
        probe.fail("expert", task.task_id, "info.won after the plan's last action",
                   f"is False ({len(plan)} actions)",
                   "expert(task) solves the task from its initial state (Environment.expert)")
    return episode


def _random_play(probe: _Probe, env: Any, task: Any, seed: int) -> _Episode | None:
    episode = _reset(probe, env, task)
    if episode is None:
        return None
    rng = random.Random(f"{seed}/{task.task_id}")
    for t in range(RANDOM_STEPS):
        if episode.done or not episode.admissible:
            break
        action = rng.choice(episode.admissible)
        if _step(probe, env, episode, action, f"{task.task_id}, random step {t}",
                 "observation") is None:
            break
    return episode


# THE VERIFIER


def _verifier(probe: _Probe, verifier: Verifier, task_id: str, episodes: list[_Episode],
              expert: _Episode | None) -> None:
    keys: set[str] = set()
    for episode in episodes:
        if episode.broken:
            continue
        keys.update(k for snapshot in episode.snapshots for k in snapshot)
        try:
            keys.update(evidence_timeline(verifier, episode.observations,
                                          episode.snapshots)[-1])
        except Exception as error:  # noqa: BLE001
            probe.fail("verifier", task_id, "extract_evidence(text, state)", _raised(error),
                       "a dict of the evidence variables the text reveals (Verifier)")
            return
    if not keys:
        return
    for atom in verifier.atoms:
        read = {part for key in atom.state_vars
                for part in (split_guard(key)[0], *(split_guard(key)[1] or ())[:1])}
        if atom.score_role == "hard" and read and not read & keys:
            probe.fail("verifier", task_id, f"the state_vars of atom {atom.atom_id!r}",
                       f"name {_show(sorted(read))}, in no snapshot or evidence played",
                       "a hard atom reads variables of env.snapshot() or of the verifier's "
                       "evidence, so the state can satisfy it (docs/vict.md §4.1)")
    played = {a for episode in episodes for a in episode.actions}
    ids = {atom.atom_id for atom in verifier.atoms}
    for action in sorted(played):
        try:
            named = set(verifier.commit_scope(action)) if verifier.is_commit(action) else set()
        except Exception as error:  # noqa: BLE001
            probe.fail("verifier", task_id, f"is_commit / commit_scope({action!r})",
                       _raised(error), "commit predicates answer any action text (Verifier)")
            return
        if named - ids:
            probe.fail("verifier", task_id, f"commit_scope({action!r})",
                       f"names {_show(sorted(named - ids))}, not atoms of the verifier",
                       "a commit's scope names atoms of the verifier (Verifier.commit_scope)")
    if expert is None or expert.broken:
        return
    try:
        trace = trace_rollout(verifier, expert.observations, expert.snapshots, expert.actions,
                              valid=expert.valid)
    except Exception as error:  # noqa: BLE001
        probe.fail("verifier", task_id, "the trace of the expert's play", _raised(error),
                   "the verifier traces any rollout of its task (verifier/trace.py)")
        return
    for j, atom in enumerate(verifier.atoms):
        if all(row[j] is Status.UNK for row in trace.statuses):
            probe.fail("verifier", task_id, f"atom {atom.atom_id!r} "
                       f"({atom.evaluable_when})", "is UNK at every step of the expert's play",
                       "every atom is evaluated: online at every step, terminal_only at the "
                       "end, on_commit once a commit's commit_scope names it "
                       "(docs/vict.md §4.1)")
