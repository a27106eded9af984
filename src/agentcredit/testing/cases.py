"""Generated credit batches for the conformance suite (``testing/conformance.py``).

A ``Case`` is a batch kept as plain per-rollout lists, so a check can permute its rollouts,
split a rollout's rows or drop an input and build the ``CreditBatch`` again. Every rollout
plays one synthetic task: three boolean state variables ``v0``, ``v1``, ``v2`` that the
rollout's steps switch on; the task is won when all three are on, which is also the outcome
reward at the last step, so the verifier ``traces`` agree with the rewards. Each case
carries every input an estimator can declare (``credit.registry.INPUTS``):

- ``traces``: each rollout traced through ``goal_verifier`` (three hard atoms, ``a2`` needs
  ``a1``, and an on-evidence prerequisite);
- ``teacher`` / ``reference``: one to three response tokens per step with random ``ℓ^T``,
  ``ℓ^b`` and ``ℓ_ref``;
- ``hindsight``: random ``m^H`` and ``m^b`` per step.

Anchor keys are the state before each step (``"v0,v2"``), so rollouts of a group share
anchors where their states meet, as GiGPO's step level needs.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agentcredit.credit.batch import CreditBatch
from agentcredit.verifier.aggregators import ConjunctiveAggregator
from agentcredit.verifier.atoms import Atom, Status, Verifier
from agentcredit.verifier.closure import DependencyGraph
from agentcredit.verifier.trace import trace_rollout

VARIABLES = ("v0", "v1", "v2")
#: the reward of an invalid step, as the environments give it
INVALID_PENALTY = -0.1
#: the two outcomes of a lost (``False``) and a won (``True``) rollout's twins (``sign_cases``)
SIGN_OUTCOMES = {False: (0.0, 0.3), True: (1.0, 0.6)}


def _switched_on(var: str):
    return lambda state, evidence: Status.SAT if state.get(var) else Status.UNSAT


def _seen(var: str):
    return lambda state, evidence: Status.SAT if evidence.get(var) else Status.UNSAT


def goal_verifier(task_id: str) -> Verifier:
    """The synthetic task's verifier: hard atoms ``a0``..``a2`` (``v0``..``v2`` on, ``a2``
    depending on ``a1``) and a prerequisite ``seen`` (the word ``hint`` observed)."""
    atoms = (
        Atom("a0", _switched_on("v0"), "online", (), ("v0",), "hard", level=0),
        Atom("a1", _switched_on("v1"), "online", (), ("v1",), "hard", level=0),
        Atom("a2", _switched_on("v2"), "online", ("a1",), ("v2",), "hard", level=0),
        Atom("seen", _seen("hint"), "on_evidence", (), ("hint",), "prerequisite", level=2),
    )
    return Verifier(
        task_id=task_id, atoms=atoms, aggregate=ConjunctiveAggregator.from_atoms(atoms),
        original=lambda state: float(all(state.get(v) for v in VARIABLES)),
        is_commit=lambda action: False, commit_scope=lambda action: (),
        extract_evidence=lambda text, state: {"hint": True} if "hint" in text else {},
        env="conformance")


@dataclass(frozen=True)
class Rollout:
    """One generated rollout of ``T`` steps, as plain lists.

    Attributes:
        group: its task group id.
        rewards: ``T`` step rewards (invalid penalties, the outcome at the last step).
        snapshots: ``T+1`` states, the reset's first.
        observations: ``T+1`` observation texts, the reset's first.
        actions: ``T`` action texts.
        teacher, behaviour, reference: ``T`` lists of per-token log-probs (same lengths).
        hindsight, behaviour_means: ``T`` per-step mean log-probs with and without hindsight.
        anchor_keys: ``T`` anchor keys, or ``None`` for the state before each step.
    """

    group: int
    rewards: tuple[float, ...]
    snapshots: tuple[dict, ...]
    observations: tuple[str, ...]
    actions: tuple[str, ...]
    teacher: tuple[tuple[float, ...], ...]
    behaviour: tuple[tuple[float, ...], ...]
    reference: tuple[tuple[float, ...], ...]
    hindsight: tuple[float, ...]
    behaviour_means: tuple[float, ...]
    anchor_keys: tuple[str, ...] | None = None

    @property
    def num_steps(self) -> int:
        """``T``."""
        return len(self.rewards)

    def same_steps(self, other: Rollout) -> bool:
        """Whether ``other`` has this rollout's steps: every field but the group and rewards."""
        return replace(other, group=self.group, rewards=self.rewards) == self

    @property
    def anchors(self) -> tuple[str, ...]:
        """``anchor_keys``, else the state before each step as text (GiGPO's anchor keys)."""
        if self.anchor_keys is not None:
            return self.anchor_keys
        return tuple(",".join(v for v in VARIABLES if s.get(v)) or "start"
                     for s in self.snapshots[:-1])


@dataclass(frozen=True)
class Case:
    """A named batch of generated rollouts (rollouts of a group need not be adjacent)."""

    name: str
    rollouts: tuple[Rollout, ...]

    def batch(self, inputs: Sequence[str]) -> CreditBatch:
        """The ``CreditBatch`` of this case carrying exactly ``inputs`` (from ``INPUTS``)."""
        inputs = set(inputs)
        rollouts = self.rollouts
        tokens = "teacher" in inputs or "reference" in inputs
        traces = None
        if "traces" in inputs:
            verifier = goal_verifier(self.name)
            graph = DependencyGraph.from_atoms(verifier.atoms)
            traces = [trace_rollout(verifier, r.observations, r.snapshots, r.actions, graph=graph)
                      for r in rollouts]
        return CreditBatch.from_lists(
            [r.rewards for r in rollouts], [r.group for r in rollouts],
            [r.anchors for r in rollouts], traces=traces,
            action_keys=[r.actions for r in rollouts],
            teacher_logprobs=[r.teacher for r in rollouts] if tokens else None,
            behaviour_logprobs=[r.behaviour for r in rollouts] if tokens else None,
            ref_logprobs=[r.reference for r in rollouts] if tokens else None,
            update=1 if tokens else None,
            hindsight_means=[r.hindsight for r in rollouts] if "hindsight" in inputs else None,
            behaviour_means=([r.behaviour_means for r in rollouts]
                             if "hindsight" in inputs else None))

    def returns(self) -> list[float]:
        """Each rollout's return ``Σ_t r_t``."""
        return [sum(r.rewards) for r in self.rollouts]

    def permuted(self, order: Sequence[int], relabel: dict[int, int]) -> Case:
        """The rollouts in ``order`` with group ids renamed by ``relabel``."""
        return replace(self, rollouts=tuple(replace(self.rollouts[i],
                                                    group=relabel[self.rollouts[i].group])
                                            for i in order))

    def with_noise(self, seed: int, inputs: Sequence[str]) -> Case:
        """The same rollouts with fresh random values for ``inputs`` (``teacher``,
        ``reference``, ``hindsight``; ``traces`` get the hint word moved)."""
        rng = random.Random(seed)
        inputs = set(inputs)

        def noisy(r: Rollout) -> Rollout:
            changes: dict = {}
            if "teacher" in inputs:
                changes["teacher"] = _token_logprobs(rng, r.teacher)
                changes["behaviour"] = _token_logprobs(rng, r.teacher)
            if "reference" in inputs:
                changes["reference"] = _token_logprobs(rng, r.teacher)
            if "hindsight" in inputs:
                changes["hindsight"] = tuple(rng.uniform(-2, 0) for _ in r.rewards)
                changes["behaviour_means"] = tuple(rng.uniform(-2, 0) for _ in r.rewards)
            if "traces" in inputs:
                changes["observations"] = tuple(o.replace(" hint", "") + (
                    " hint" if rng.random() < 0.5 else "") for o in r.observations)
            return replace(r, **changes)

        return replace(self, rollouts=tuple(noisy(r) for r in self.rollouts))


def _token_logprobs(rng: random.Random, like: tuple[tuple[float, ...], ...]
                    ) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(rng.uniform(-3.0, -0.01) for _ in step) for step in like)


def make_rollout(rng: random.Random, group: int, length: int, won: bool, *,
                 invalid_rate: float = 0.0) -> Rollout:
    """A rollout of ``length`` steps that switches the variables on (all of them iff ``won``),
    with invalid steps at ``invalid_rate`` (each ``INVALID_PENALTY``)."""
    if won:
        switched = {v: rng.randrange(length) for v in VARIABLES}
    else:
        missing = rng.choice(VARIABLES)
        switched = {v: rng.randrange(length) for v in VARIABLES if v != missing}
    snapshots, observations, actions, rewards = [{}], ["start"], [], []
    for t in range(length):
        on = [v for v in VARIABLES if switched.get(v) == t]
        invalid = not on and rng.random() < invalid_rate
        actions.append("switch " + " ".join(on) if on else ("??" if invalid else "look"))
        snapshots.append({v: switched.get(v, length) <= t for v in VARIABLES})
        observations.append((" ".join(on) or "nothing") + (" hint" if rng.random() < 0.3 else ""))
        rewards.append(INVALID_PENALTY if invalid else 0.0)
    rewards[-1] += float(won)
    teacher = tuple(tuple(rng.uniform(-3.0, -0.01) for _ in range(rng.randint(1, 3)))
                    for _ in range(length))
    return Rollout(group=group, rewards=tuple(rewards), snapshots=tuple(snapshots),
                   observations=tuple(observations), actions=tuple(actions), teacher=teacher,
                   behaviour=_token_logprobs(rng, teacher), reference=_token_logprobs(rng, teacher),
                   hindsight=tuple(rng.uniform(-2, 0) for _ in range(length)),
                   behaviour_means=tuple(rng.uniform(-2, 0) for _ in range(length)))


def generated_cases(seed: int = 0) -> list[Case]:
    """The conformance suite's batches:

    - ``mixed``: groups of 1, 2, 3 and 5 rollouts of 1..6 steps, won and lost, with invalid
      steps (returns mostly distinct);
    - ``ties``: groups of 4 and 6 whose returns are only 0 and 1 (many ties, no penalties);
    - ``constant``: groups of 2..4 whose rollouts all won or all lost, of different lengths,
      no penalties (every group's returns equal);
    - ``single_steps``: groups of 3 one-step rollouts.
    """
    rng = random.Random(seed)
    mixed = [make_rollout(rng, group, rng.randint(1, 6), rng.random() < 0.5, invalid_rate=0.3)
             for group, size in enumerate((1, 2, 3, 5)) for _ in range(size)]
    # a mixed group is guaranteed a winner and a loser
    mixed += [make_rollout(rng, 7, 3, True, invalid_rate=0.3),
              make_rollout(rng, 7, 4, False, invalid_rate=0.3)]
    ties = [make_rollout(rng, 10 + group, rng.randint(1, 5), won)
            for group, size in enumerate((4, 6)) for won in [True, False] * (size // 2)]
    constant = [make_rollout(rng, 20 + group, rng.randint(1, 5), won)
                for group, (size, won) in enumerate(((2, True), (3, False), (4, True)))
                for _ in range(size)]
    single = [make_rollout(rng, 30, 1, won) for won in (True, False, False)]
    cases = [Case("mixed", tuple(mixed)), Case("ties", tuple(ties)),
             Case("constant", tuple(constant)), Case("single_steps", tuple(single))]
    # interleave the groups so no estimator can rely on a group's rollouts being adjacent
    return [replace(c, rollouts=tuple(rng.sample(c.rollouts, len(c.rollouts)))) for c in cases]


def sign_cases(seed: int = 0) -> list[Case]:
    """Controlled batches for the ``sign`` check: each group holds rollouts of one length, each
    played twice with the same steps (actions, observations, snapshots, response tokens and
    their scores) and a different outcome, a partial score as WebShop gives: a won rollout
    scores 1 and 0.6, a lost one 0 and 0.3. Twins differ in their return alone, so whatever
    an estimator reads from the steps is the same for both.

    - ``twins``: groups of 2 or 3 rollouts (4 or 6 rows) of 1, 3 and 5 steps, won and lost;
    - ``twins_penalties``: groups of 2 rollouts of 4 steps with invalid steps (each
      ``INVALID_PENALTY``), so returns also differ between the group's rollouts by penalties.
    """
    rng = random.Random(seed)

    def twins(group: int, length: int, wins: Sequence[bool], invalid_rate: float
              ) -> list[Rollout]:
        out = []
        for won in wins:
            rollout = make_rollout(rng, group, length, won, invalid_rate=invalid_rate)
            for outcome in (SIGN_OUTCOMES[won]):
                rewards = (*rollout.rewards[:-1], rollout.rewards[-1] - float(won) + outcome)
                out.append(replace(rollout, rewards=rewards))
        return out

    plain = [r for group, (length, wins) in enumerate(
        ((1, (True, False)), (3, (False, True, False)), (5, (True, False))))
        for r in twins(group, length, wins, 0.0)]
    penalties = [r for group in (10, 11) for r in twins(group, 4, (True, False), 0.5)]
    cases = [Case("twins", tuple(plain)), Case("twins_penalties", tuple(penalties))]
    return [replace(c, rollouts=tuple(rng.sample(c.rollouts, len(c.rollouts)))) for c in cases]


def turn_rollout(group: int, length: int, max_turns: int, outcome: float) -> Rollout:
    """A rollout of the stop-or-continue task: the policy continues for ``length − 1`` turns and
    stops at turn ``length − 1`` (forced at ``max_turns``); the outcome ``outcome`` comes at the
    last step and the task counts as won when it is positive. Turn ``t``'s anchor is
    ``turn{t}``: the state is the turn, whatever the rollout did before."""
    won = outcome > 0
    actions = tuple("continue" if t < length - 1 else "stop" for t in range(length))
    snapshots = tuple({v: won and t == length for v in VARIABLES} for t in range(length + 1))
    teacher = tuple((-1.0 - 0.1 * t,) for t in range(length))
    return Rollout(group=group, rewards=(0.0,) * (length - 1) + (outcome,),
                   snapshots=snapshots, observations=("start",) + actions, actions=actions,
                   teacher=teacher, behaviour=teacher, reference=teacher,
                   hindsight=tuple(-1.0 for _ in range(length)),
                   behaviour_means=tuple(-1.0 for _ in range(length)),
                   anchor_keys=tuple(f"turn{t}" for t in range(length)))
