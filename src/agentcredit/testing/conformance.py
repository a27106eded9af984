"""The conformance suite for any advantage estimator (docs/extending.md, "Check an estimator").

Credit bugs are silent: the run trains, only worse. ``check_estimator`` runs a registered
estimator on generated batches (``testing/cases.py``: varied group sizes and rollout lengths,
constant and mixed groups, ties) and checks the family of faults public reports describe.
Every estimator is held to the first four (but a check it waives with its reason,
``register_estimator(..., waives={"sign": "why"})``, ``credit.registry.WAIVABLE``); the rest
apply where the estimator claims them (``register_estimator(..., claims=...)``,
``credit.registry.CLAIMS``):

- ``finite_and_shaped``: ``step_advantages [S]`` (and ``token_advantages [N]``) are finite;
- ``declared_inputs``: a batch carrying only the declared inputs runs, and changing an
  undeclared input changes nothing;
- ``deterministic``: the same batch twice gives the same output;
- ``sign``: of two rollouts of a group with the same steps (``cases.sign_cases``: the same
  actions, states, response tokens and scores, a different outcome), the one with the
  strictly higher return gets no less total advantage (the sum of its step values, or of its
  token values for a method that credits tokens); an advantage with its sign flipped passes
  every other check;
- ``permutation``: permuting the rollouts and renaming the groups permutes the output (all
  but ``random_edges``, a control that draws its shuffle in batch order);
- ``step_credit``: every step of a rollout whose return differs from its group's mean gets a
  non-zero value (no step silently left at 0);
- ``constant_group_zero``: a group whose returns are all equal gets 0 at every step;
- ``returns_only``: splitting a trajectory into more rows with the same return changes no
  value (no rollout weighted by its row count);
- ``turn_baseline``: when the policy decides how many turns it takes, the expected policy
  gradient of the advantages (enumerated exactly over every group of a stop-or-continue task)
  points the same way as the true one at every turn, within a factor ``TURN_RATIO``.

Use it from pytest with ``assert_conforms("name")`` or from the shell with
``agentcredit conformance NAME``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from agentcredit.credit.registry import INPUTS, Estimator, get_estimator
from agentcredit.credit.result import CreditResult
from agentcredit.testing.cases import Case, generated_cases, sign_cases, turn_rollout

#: checks every estimator must pass
GENERAL_CHECKS = ("finite_and_shaped", "declared_inputs", "deterministic", "sign")
#: how far below the worse rollout's total the better one's may fall in ``sign`` (float noise)
SIGN_TOLERANCE = 1e-5
#: the largest factor by which the expected gradient of a ``turn_baseline`` estimator may
#: differ from the true one at a turn (a group-mean baseline shrinks it by (G−1)/G, std
#: normalisation rescales it)
TURN_RATIO = 4.0
#: stop-or-continue task: continue probabilities per turn and the outcome of each length
TURN_CONTINUE = (0.6, 0.5)
TURN_OUTCOMES = (0.0, 1.0, 0.5)
TURN_GROUP = 3


@dataclass(frozen=True)
class Failure:
    """One failed check: which, on which generated case, and what went wrong."""

    check: str
    case: str
    message: str

    def __str__(self) -> str:
        return f"{self.check} [{self.case}]: {self.message}"


@dataclass(frozen=True)
class ConformanceReport:
    """What ``check_estimator`` found.

    Attributes:
        estimator: the estimator's name.
        checks: the checks that ran, in order (general ones, then the claimed ones).
        failures: one ``Failure`` per failed check and case.
        waived: the general checks the estimator waives, each with its reason.
    """

    estimator: str
    checks: tuple[str, ...]
    failures: tuple[Failure, ...]
    waived: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return not self.failures

    def lines(self) -> list[str]:
        """One line per check: ``ok  NAME``, ``FAIL NAME [case]: why`` or ``skip NAME: waived,
        why``."""
        out = []
        for check in CHECKS:
            if check in self.waived:
                out.append(f"skip {check}: waived, {self.waived[check]}")
            elif check in self.checks:
                failed = [f for f in self.failures if f.check == check]
                out += [f"FAIL {f}" for f in failed] or [f"ok   {check}"]
        return out


def assert_conforms(estimator: str | Estimator, config: Any = None, *, seed: int = 0) -> None:
    """Raise ``AssertionError`` listing every failed check (for pytest)."""
    report = check_estimator(estimator, config, seed=seed)
    if not report.ok:
        raise AssertionError(f"estimator {report.estimator!r} fails the conformance suite:\n"
                             + "\n".join(str(f) for f in report.failures))


def check_estimator(estimator: str | Estimator, config: Any = None, *, seed: int = 0
                    ) -> ConformanceReport:
    """Run the conformance checks (module docstring) on ``estimator`` with ``config`` (its
    defaults when ``None``) over ``generated_cases(seed)``."""
    if isinstance(estimator, str):
        estimator = get_estimator(estimator)
    if config is None:
        config = estimator.config_cls()
    run = _Runner(estimator, config)
    checks = (tuple(c for c in GENERAL_CHECKS if c not in estimator.waives)
              + tuple(c for c in CHECKS_BY_CLAIM if c in estimator.claims))
    failures: list[Failure] = []
    for check in checks:
        for case in _cases(check, seed):
            try:
                problem = CHECKS[check](run, case)
            except Exception as error:  # noqa: BLE001  (a crash is a finding, with its cause)
                problem = f"raised {type(error).__name__}: {error}"
            if problem:
                failures.append(Failure(check, case.name, problem))
    return ConformanceReport(estimator.name, checks, tuple(failures), dict(estimator.waives))


def _cases(check: str, seed: int) -> list[Case]:
    """The batches ``check`` runs on: ``sign`` its controlled pairs, ``turn_baseline`` once
    (it enumerates its own groups, ``turn_gradients``), the others the generated cases."""
    if check == "sign":
        return sign_cases(seed)
    if check == "turn_baseline":
        return [Case("stop_or_continue", ())]
    return generated_cases(seed)


# RUNNING AN ESTIMATOR ON A CASE


@dataclass(frozen=True)
class _Output:
    """One rollout's output: its step values ``[T]`` and per-step token values (or ``None``)."""

    steps: Tensor
    tokens: tuple[Tensor, ...] | None


class _Runner:
    """Runs one estimator with one config on cases, with exactly its declared inputs."""

    def __init__(self, estimator: Estimator, config: Any) -> None:
        self.estimator = estimator
        self.config = config
        self.inputs = tuple(sorted(estimator.inputs(config)))

    def result(self, case: Case, inputs: Sequence[str] | None = None) -> CreditResult:
        batch = case.batch(self.inputs if inputs is None else inputs)
        return self.estimator(batch, self.config)

    def per_rollout(self, case: Case, inputs: Sequence[str] | None = None) -> list[_Output]:
        """The output split by rollout (and by step for token values)."""
        batch = case.batch(self.inputs if inputs is None else inputs)
        result = self.estimator(batch, self.config)
        steps = result.step_advantages.detach().double()
        tokens = None
        if result.token_advantages is not None:
            token_step = batch.tokens.token_step
            values = result.token_advantages.detach().double()
            tokens = [values[token_step == s] for s in range(batch.num_steps)]
        out = []
        for i in range(batch.num_rollouts):
            rows = torch.nonzero(batch.step_rollout == i).flatten().tolist()
            out.append(_Output(steps[rows], None if tokens is None
                               else tuple(tokens[s] for s in rows)))
        return out


def _same(a: _Output, b: _Output) -> bool:
    if not torch.allclose(a.steps, b.steps, rtol=1e-4, atol=1e-5):
        return False
    if (a.tokens is None) != (b.tokens is None):
        return False
    return a.tokens is None or all(torch.allclose(x, y, rtol=1e-4, atol=1e-5)
                                   for x, y in zip(a.tokens, b.tokens, strict=True))


def _show(values: Tensor) -> str:
    return "[" + ", ".join(f"{v:.4g}" for v in values.tolist()) + "]"


# THE CHECKS: each returns None when it passes, else what went wrong (one line)


def _finite_and_shaped(run: _Runner, case: Case) -> str | None:
    batch = case.batch(run.inputs)
    result = run.estimator(batch, run.config)
    steps = result.step_advantages
    if tuple(steps.shape) != (batch.num_steps,):
        return (f"step_advantages has shape {tuple(steps.shape)} but the batch has "
                f"{batch.num_steps} steps; return one value per step [S]")
    if not torch.isfinite(steps).all():
        bad = int(torch.nonzero(~torch.isfinite(steps))[0])
        return f"step_advantages[{bad}] = {steps[bad].item()} is not finite"
    tokens = result.token_advantages
    if tokens is not None:
        if batch.tokens is None or tuple(tokens.shape) != tuple(batch.tokens.token_step.shape):
            expected = None if batch.tokens is None else tuple(batch.tokens.token_step.shape)
            return (f"token_advantages has shape {tuple(tokens.shape)}; expected {expected} "
                    "(one value per valid response token, batch.tokens.token_step)")
        if not torch.isfinite(tokens).all():
            bad = int(torch.nonzero(~torch.isfinite(tokens))[0])
            return f"token_advantages[{bad}] = {tokens[bad].item()} is not finite"
    return None


def _permutation(run: _Runner, case: Case) -> str | None:
    before = run.per_rollout(case)
    order = list(reversed(range(len(case.rollouts))))
    order = order[1::2] + order[0::2]
    relabel = {g: 1000 - 7 * g for g in {r.group for r in case.rollouts}}
    after = run.per_rollout(case.permuted(order, relabel))
    for new, old in enumerate(order):
        if not _same(after[new], before[old]):
            return (f"rollout {old} got {_show(before[old].steps)} but "
                    f"{_show(after[new].steps)} once the rollouts were reordered (it became "
                    f"rollout {new}) and the groups renamed; the output must follow the rollouts, "
                    "not their position or group id")
    return None


def _deterministic(run: _Runner, case: Case) -> str | None:
    first, second = run.per_rollout(case), run.per_rollout(case)
    for i, (a, b) in enumerate(zip(first, second, strict=True)):
        if not _same(a, b):
            return (f"rollout {i} got {_show(a.steps)} then {_show(b.steps)} on the same "
                    "batch; seed any randomness from the batch, not global state")
    return None


def _declared_inputs(run: _Runner, case: Case) -> str | None:
    undeclared = [name for name in INPUTS if name not in run.inputs]
    for name in undeclared:
        # the reference travels with the teacher's scores, so it comes and goes with them
        carried = sorted({*run.inputs, name, *(("teacher",) if name == "reference" else ())})
        try:
            with_input = run.per_rollout(case, carried)
            noisy = run.per_rollout(case.with_noise(1, [name]), carried)
        except Exception as error:  # noqa: BLE001  (a crash names what it read)
            return (f"raised {type(error).__name__} when the batch also carried {name!r}: "
                    f"{error}")
        without = run.per_rollout(case)
        for i, (a, b, c) in enumerate(zip(without, with_input, noisy, strict=True)):
            if not (_same(a, b) and _same(a, c)):
                return (f"rollout {i} changed when the batch carried the undeclared input "
                        f"{name!r} ({_show(a.steps)} → {_show(c.steps)}); declare it with "
                        f"register_estimator(..., needs=({name!r},)) or stop reading it")
    return None


def _sign(run: _Runner, case: Case) -> str | None:
    outputs = run.per_rollout(case)
    returns = case.returns()
    # the total a rollout's steps get: what its policy-gradient terms are weighted by
    totals = [float(out.steps.sum()) if out.tokens is None
              else float(sum(t.sum() for t in out.tokens)) for out in outputs]
    for better, worse in itertools.permutations(range(len(case.rollouts)), 2):
        a, b = case.rollouts[better], case.rollouts[worse]
        if a.group != b.group or returns[better] <= returns[worse] or not a.same_steps(b):
            continue
        if totals[better] < totals[worse] - SIGN_TOLERANCE * max(1.0, abs(totals[worse])):
            return (f"rollout {better} (return {returns[better]:.4g}) got a total advantage "
                    f"of {totals[better]:.4g} over its {a.num_steps} steps, less than rollout "
                    f"{worse} of its group with the same steps and the lower return "
                    f"{returns[worse]:.4g} ({totals[worse]:.4g}); a higher return must not "
                    "earn less credit (is the advantage's sign flipped?)")
    return None


def _step_credit(run: _Runner, case: Case) -> str | None:
    outputs = run.per_rollout(case)
    returns = case.returns()
    for i, (rollout, out) in enumerate(zip(case.rollouts, outputs, strict=True)):
        group = [returns[j] for j, r in enumerate(case.rollouts) if r.group == rollout.group]
        mean = sum(group) / len(group)
        if math.isclose(returns[i], mean, abs_tol=1e-9):
            continue
        valued = (out.steps != 0) if out.tokens is None else torch.tensor(
            [bool((t != 0).any()) for t in out.tokens])
        silent = torch.nonzero(~valued).flatten().tolist()
        if silent:
            return (f"rollout {i} (return {returns[i]:.4g}, group mean {mean:.4g}) got 0 at "
                    f"steps {silent} of {rollout.num_steps}: {_show(out.steps)}; an estimator "
                    "that claims step_credit gives every step of a rollout that beat or "
                    "trailed its group a value")
    return None


def _constant_group_zero(run: _Runner, case: Case) -> str | None:
    outputs = run.per_rollout(case)
    returns = case.returns()
    for i, (rollout, out) in enumerate(zip(case.rollouts, outputs, strict=True)):
        group = {returns[j] for j, r in enumerate(case.rollouts) if r.group == rollout.group}
        if len(group) != 1:
            continue
        values = out.steps if out.tokens is None else torch.cat(out.tokens)
        if values.abs().max() > 1e-6:
            return (f"rollout {i} is in group {rollout.group} whose returns all equal "
                    f"{returns[i]:.4g}, yet got {_show(out.steps)}; a method that claims "
                    "constant_group_zero gives such a group no signal")
    return None


def _returns_only(run: _Runner, case: Case) -> str | None:
    before = run.per_rollout(case)
    split = max(range(len(case.rollouts)), key=lambda i: abs(before[i].steps[0]))
    rollout = case.rollouts[split]
    # one more row at the front: a no-op with reward 0, so the return is unchanged
    longer = replace(
        rollout, rewards=(0.0, *rollout.rewards), snapshots=(rollout.snapshots[0],
                                                             *rollout.snapshots),
        observations=(rollout.observations[0], *rollout.observations),
        actions=("look", *rollout.actions), teacher=(rollout.teacher[0], *rollout.teacher),
        behaviour=(rollout.behaviour[0], *rollout.behaviour),
        reference=(rollout.reference[0], *rollout.reference),
        hindsight=(rollout.hindsight[0], *rollout.hindsight),
        behaviour_means=(rollout.behaviour_means[0], *rollout.behaviour_means))
    rollouts = list(case.rollouts)
    rollouts[split] = longer
    after = run.per_rollout(replace(case, rollouts=tuple(rollouts)))
    for i, (a, b) in enumerate(zip(before, after, strict=True)):
        old = a.steps if i != split else a.steps[:1].expand(b.steps.shape[0])
        if not torch.allclose(old, b.steps, rtol=1e-4, atol=1e-5):
            return (f"rollout {split} was split into one more row with the same return and "
                    f"rollout {i} went from {_show(a.steps)} to {_show(b.steps)}; a method "
                    "that claims returns_only weighs each rollout once, whatever its row count")
    return None


def turn_gradients(run_fn: Callable[[Case], CreditResult],
                   continue_prob: Sequence[float] = TURN_CONTINUE,
                   outcomes: Sequence[float] = TURN_OUTCOMES,
                   group_size: int = TURN_GROUP) -> tuple[list[float], list[float]]:
    """The true policy gradient of the stop-or-continue task and the estimator's expected one,
    per turn's logit, by enumerating every group of ``group_size`` rollouts exactly.

    The policy continues at turn ``t`` with probability ``q_t = continue_prob[t]`` (logit
    ``θ_t``) and stops at ``len(continue_prob)`` turns at the latest; a rollout of ``ℓ`` turns
    ends with outcome ``outcomes[ℓ − 1]``. The score of turn ``t``'s decision is
    ``∂ log π / ∂θ_t = 1 − q_t`` (continue) or ``−q_t`` (stop). True: ``g_t = E[R s_t]``;
    the estimator's: ``ĝ_t = E[(1/G) Σ_i Σ_t A_{i,t} s_{i,t}]``.
    """
    turns = len(continue_prob) + 1

    def prob(length: int) -> float:
        p = math.prod(continue_prob[:length - 1])
        return p * (1 - continue_prob[length - 1]) if length < turns else p

    def scores(length: int) -> list[float]:
        out = [0.0] * len(continue_prob)
        for t in range(min(length, len(continue_prob))):
            out[t] = (1 - continue_prob[t]) if t < length - 1 else -continue_prob[t]
        return out

    true = [sum(prob(n) * outcomes[n - 1] * s for n in range(1, turns + 1)
                for s in [scores(n)[t]]) for t in range(len(continue_prob))]
    estimated = [0.0] * len(continue_prob)
    for lengths in itertools.product(range(1, turns + 1), repeat=group_size):
        weight = math.prod(prob(n) for n in lengths)
        case = Case("stop_or_continue", tuple(turn_rollout(0, n, turns, outcomes[n - 1])
                                              for n in lengths))
        advantages = run_fn(case).step_advantages.double().tolist()
        offset = 0
        for n in lengths:
            for t, s in enumerate(scores(n)):
                if t < n:
                    estimated[t] += weight * advantages[offset + t] * s / group_size
            offset += n
    return true, estimated


def _turn_baseline(run: _Runner, case: Case) -> str | None:
    true, estimated = turn_gradients(run.result)
    for t, (g, e) in enumerate(zip(true, estimated, strict=True)):
        ratio = e / g
        if not 1 / TURN_RATIO <= ratio <= TURN_RATIO:
            return (f"when the policy decides how many turns it takes, the expected gradient "
                    f"of turn {t}'s decision is {e:.4g} against the true {g:.4g} (ratio "
                    f"{ratio:.3g}, allowed {1 / TURN_RATIO:g}..{TURN_RATIO:g}): the per-turn "
                    "baseline depends on the decision it scores; build it from what is "
                    "known before the turn (the group, the anchor state), never from which "
                    "rollouts lasted")
    return None


CHECKS: dict[str, Callable[[_Runner, Case], str | None]] = {
    "finite_and_shaped": _finite_and_shaped,
    "declared_inputs": _declared_inputs,
    "deterministic": _deterministic,
    "sign": _sign,
    "step_credit": _step_credit,
    "constant_group_zero": _constant_group_zero,
    "permutation": _permutation,
    "returns_only": _returns_only,
    "turn_baseline": _turn_baseline,
}
"""Every check, in the order they run (``GENERAL_CHECKS``, then ``CHECKS_BY_CLAIM``)."""
#: the checks an estimator opts into through its claims, in the order they run
CHECKS_BY_CLAIM = ("step_credit", "constant_group_zero", "permutation", "returns_only",
                   "turn_baseline")
