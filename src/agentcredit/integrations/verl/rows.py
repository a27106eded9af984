"""verl's per-step rows ⇄ the project's ``CreditBatch`` (docs/verl.md, "The advantage step").

In verl every training row is one step of one rollout (the layout verl-agent uses):
the step's prompt, its response, and a ``response_mask [R, L]`` over the response
tokens. The agent loop (``agent_loop.py``) attaches to each row the fields named
below (``step_fields``), as plain data; verl keeps them in its non-tensor batch and may
reorder the rows (``balance_batch``). The verifier trace travels pickled (``TRACE``,
``pack_trace``): verl's agent loop dumps each output with pydantic
(``AgentLoopOutput.as_dict``), which turns a dataclass in ``extra_fields`` into nested
dicts that cannot be turned back into a ``RolloutTrace`` (its aggregator is a dataclass
too), while bytes pass through unchanged. The rows hold those bytes on every path, the
agent loop's and one built in process alike; ``credit_batch_from_rows`` unpickles them.

This module turns such rows into the ``CreditBatch`` the embedded trainer builds
(``train.step_tensors.credit_batch``), adds DAPO's overlong penalty as it does
(``credit/overlong.py``), runs the estimator from the same registry
(``credit.get_estimator``), and writes the advantages back per token in verl's row
order. It never imports verl: the rows are plain sequences and tensors, exactly what a
``DataProto`` holds, so it is tested without verl (tests/integrations/verl/test_equivalence.py).

Flat order: rollouts sorted by trajectory id, each rollout's steps in time order;
``RowCredit.order[s]`` is the verl row of flat step ``s``.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from agentcredit.credit import CreditBatch, CreditResult, TokenScores, get_estimator
from agentcredit.credit.overlong import OverlongPenalty
from agentcredit.integrations.verl.supported import VERL_INPUTS
from agentcredit.rollout.records import Trajectory
from agentcredit.verifier.trace import RolloutTrace

# THE ROW FIELDS (verl non-tensor batch keys; the group is verl's own prompt ``uid``)
GROUP = "uid"
TRAJECTORY = "ac_trajectory"  # str: one rollout, "{uid}_{session_id}"
STEP = "ac_step"  # int: t, the step's index in its rollout
NUM_STEPS = "ac_num_steps"  # int: T_i, so a rollout with a lost row is caught
REWARD = "ac_reward"  # float: r_{i,t} (docs/backbones.md §2)
ANCHOR = "ac_anchor"  # str: GiGPO's anchor state, the observation before the step
ACTION = "ac_action"  # str: the action sent (parsed action, else the raw response)
TRACE = "ac_trace"  # bytes: the pickled RolloutTrace on step 0 when VICT needs it, else None
SKILL = "ac_skill"  # str: "<env>/<task_type>", the task's skill for ADRS's teacher pass
#: the per-step fields the agent loop emits (``step_fields``); the hook reads them back.
STEP_FIELDS = (TRAJECTORY, STEP, NUM_STEPS, REWARD, ANCHOR, ACTION, TRACE, SKILL)
#: the teacher pass's ``ℓ^T [R, L]``, response-aligned, that the trainer hook adds.
TEACHER = "ac_teacher_log_probs"


def skill_id(env: str, task_type: str) -> str:
    """The ``SKILL`` field of a task: which skill text the teacher pass splices in."""
    return f"{env}/{task_type}"


def step_fields(trajectory: Trajectory, trajectory_id: str,
                trace: RolloutTrace | None = None) -> list[dict[str, Any]]:
    """The ``STEP_FIELDS`` of every step of ``trajectory``, in time order (plain data).

    The trace rides on step 0 only, pickled (``pack_trace``), so a batch carries each
    trace once.
    """
    steps = trajectory.steps
    task = trajectory.task
    return [{
        TRAJECTORY: trajectory_id,
        STEP: t,
        NUM_STEPS: len(steps),
        REWARD: float(step.reward),
        ANCHOR: step.anchor_key,
        ACTION: step.response if step.action is None else step.action,
        TRACE: pack_trace(trace) if t == 0 and trace is not None else None,
        SKILL: skill_id(task.env, task.task_type),
    } for t, step in enumerate(steps)]


def pack_trace(trace: RolloutTrace) -> bytes:
    """The ``TRACE`` field of ``trace``: its pickle (``unpack_trace`` reads it back).

    Raises ``ValueError`` when the trace does not pickle: its verifier's aggregator is a
    lambda or closure rather than a frozen dataclass (``verifier/aggregators.py``).
    """
    # pickle is safe here: these bytes only travel from our own agent-loop workers to our
    # trainer within one job, never from outside it
    try:
        return pickle.dumps(trace, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError) as err:
        raise ValueError(f"the verifier trace of task {trace.task_id!r} does not pickle ({err}); "
                         "give the verifier's aggregate as a frozen dataclass of plain fields "
                         "(verifier/aggregators.py), not a lambda or closure.") from err


def unpack_trace(packed: bytes, trajectory_id: str) -> RolloutTrace:
    """The ``RolloutTrace`` that ``pack_trace`` pickled into trajectory ``trajectory_id``'s
    step 0; ``TypeError`` when the field holds anything but bytes."""
    if not isinstance(packed, bytes):
        raise TypeError(f"trajectory {trajectory_id!r} carries a {type(packed).__name__} in "
                         f"{TRACE!r} where the pickled trace of rows.step_fields was due; emit "
                         "the rows with rows.step_fields (verl turns a dataclass into dicts).")
    return pickle.loads(packed)


@dataclass(frozen=True)
class StepRows:
    """The rows of one verl batch as the advantage step reads them (``R`` rows).

    Attributes:
        fields: per ``STEP_FIELDS`` name and ``GROUP``, ``R`` values in verl's row order.
        response_mask: ``[R, L]``, 1 on the response tokens the policy wrote.
        old_log_probs: ``[R, L]`` ``ℓ^b``, verl's recomputed behaviour log-probs, or ``None``.
        ref_log_prob: ``[R, L]`` ``ℓ_ref`` of the reference policy, or ``None``.
        teacher_log_probs: ``[R, L]`` ``ℓ^T`` from the skill-prefixed pass, or ``None``.
    """

    fields: dict[str, Sequence[Any]]
    response_mask: Tensor
    old_log_probs: Tensor | None = None
    ref_log_prob: Tensor | None = None
    teacher_log_probs: Tensor | None = None

    @property
    def num_rows(self) -> int:
        """``R``."""
        return self.response_mask.shape[0]


@dataclass(frozen=True)
class RowCredit:
    """A credit batch built from rows, and where each of its flat steps came from.

    Attributes:
        batch: the ``CreditBatch``.
        order: ``[S]`` int64, the verl row of flat step ``s`` (``S = R``).
        trajectory_ids: ``B`` trajectory ids in rollout order.
    """

    batch: CreditBatch
    order: Tensor
    trajectory_ids: tuple[str, ...]


def credit_batch_from_rows(rows: StepRows, inputs: frozenset[str] = frozenset(),
                           update: int | None = None) -> RowCredit:
    """The ``CreditBatch`` of ``rows`` with the ``inputs`` an estimator declared.

    Raises ``ValueError`` (saying what to fix) when a field is missing, a rollout lost a
    row or repeats a step, or a declared input is absent from the rows.
    """
    unsupported = set(inputs) - VERL_INPUTS
    if unsupported:
        raise ValueError(f"the verl path cannot prepare {sorted(unsupported)}; it prepares "
                         f"{sorted(VERL_INPUTS)}. Use the embedded trainer for this method.")
    need = [GROUP, TRAJECTORY, STEP, NUM_STEPS, REWARD, ANCHOR, ACTION]
    need += [TRACE] if "traces" in inputs else []
    missing = [name for name in need if name not in rows.fields]
    if missing:
        raise ValueError(f"the batch has no {missing} field; run rollouts with agentcredit's "
                         "agent loop (actor_rollout_ref.rollout.agent.default_agent_loop="
                         "agentcredit), which emits them on every row.")
    count = rows.num_rows
    for name in need:
        if len(rows.fields[name]) != count:
            raise ValueError(f"field {name!r} has {len(rows.fields[name])} values for {count} rows")
    column = {name: list(rows.fields[name]) for name in need}

    # ORDER: rollouts by trajectory id, steps by time
    trajectory_ids = sorted(set(map(str, column[TRAJECTORY])))
    rollout_of = {tid: i for i, tid in enumerate(trajectory_ids)}
    keys = [(rollout_of[str(column[TRAJECTORY][r])], int(column[STEP][r])) for r in range(count)]
    order = sorted(range(count), key=keys.__getitem__)
    _check_complete(order, keys, column, trajectory_ids)

    first_row = {}  # rollout -> its step-0 row
    for r in order:
        first_row.setdefault(keys[r][0], r)
    uids = [str(column[GROUP][first_row[i]]) for i in range(len(trajectory_ids))]
    dense = {uid: g for g, uid in enumerate(sorted(set(uids)))}
    for r in order:
        if str(column[GROUP][r]) != uids[keys[r][0]]:
            raise ValueError(f"trajectory {column[TRAJECTORY][r]!r} has rows of two groups "
                             f"({uids[keys[r][0]]!r}, {column[GROUP][r]!r}); a rollout's steps "
                             "must share the uid of the prompt they answer.")
    lengths = torch.tensor([int(column[NUM_STEPS][first_row[i]])
                            for i in range(len(trajectory_ids))], dtype=torch.long)
    step_rollout = torch.repeat_interleave(torch.arange(len(trajectory_ids)), lengths)
    traces = None
    if "traces" in inputs:
        packed = [column[TRACE][first_row[i]] for i in range(len(trajectory_ids))]
        absent = [trajectory_ids[i] for i, trace in enumerate(packed) if trace is None]
        if absent:
            raise ValueError(f"trajectory {absent[0]!r} has no verifier trace on its step 0; "
                             "the estimator needs traces: set agentcredit's credit.estimator "
                             "before the rollouts so the agent loop traces them.")
        traces = tuple(unpack_trace(trace, trajectory_ids[i]) for i, trace in enumerate(packed))
    batch = CreditBatch(
        group_ids=torch.tensor([dense[uid] for uid in uids], dtype=torch.long),
        step_rollout=step_rollout,
        step_index=torch.tensor([keys[r][1] for r in order], dtype=torch.long),
        step_rewards=torch.tensor([float(column[REWARD][r]) for r in order], dtype=torch.float32),
        anchor_keys=tuple(str(column[ANCHOR][r]) for r in order),
        traces=traces,
        action_keys=tuple(str(column[ACTION][r]) for r in order),
    )
    order_t = torch.tensor(order, dtype=torch.long)
    if "teacher" in inputs:
        if rows.teacher_log_probs is None:
            raise ValueError(f"the estimator needs the teacher's log-probs ({TEACHER}); train "
                             "with agentcredit's trainer (trainer.v1.trainer_mode=agentcredit), "
                             "whose teacher pass adds them.")
        batch = dataclasses.replace(batch, tokens=TokenScores.from_step_rows(
            rows.response_mask[order_t], rows.teacher_log_probs[order_t],
            _rows_or_none(rows.old_log_probs, order_t), _rows_or_none(rows.ref_log_prob, order_t),
            update=update))
    elif "reference" in inputs:
        raise ValueError("an estimator that reads the reference without a teacher is not "
                         "supported on the verl path")
    return RowCredit(batch, order_t, tuple(trajectory_ids))


def advantages_to_rows(result: CreditResult, credit: RowCredit, response_mask: Tensor) -> Tensor:
    """``[R, L]`` per-token advantages in verl's row order, 0 off the response.

    The write-back of the embedded trainer (``CreditResult.per_token``) on the rows in flat
    step order, then put back in verl's row order.
    """
    mask = response_mask[credit.order].bool()  # [S, L], flat step order
    out = torch.zeros(response_mask.shape, dtype=torch.float32)
    out[credit.order] = result.per_token(mask).cpu()
    return out


def compute_row_credit(rows: StepRows, estimator: str, options: Any = None,
                       update: int | None = None, overlong: OverlongPenalty | None = None
                       ) -> tuple[Tensor, CreditResult, RowCredit, dict[str, float]]:
    """Run ``estimator`` (the project's registry) on ``rows``: ``(advantages [R, L], result,
    row credit, metrics)``. ``options`` is the estimator's config dataclass (``None``:
    defaults); ``overlong`` adds DAPO's overlong penalty to the step rewards first, each row's
    ``|y|`` its ``response_mask`` tokens, as ``agentcredit train`` does
    (``credit/overlong.py``); its ``reward/overlong_*`` figures are the metrics."""
    registered = get_estimator(estimator)
    options = registered.config_cls() if options is None else options
    credit = credit_batch_from_rows(rows, registered.inputs(options), update)
    metrics = {}
    if overlong is not None:
        lengths = rows.response_mask[credit.order].sum(dim=1)  # [S], flat step order
        shaped, metrics = overlong.apply(credit.batch, lengths)
        credit = dataclasses.replace(credit, batch=shaped)
    result = registered(credit.batch, options)
    return advantages_to_rows(result, credit, rows.response_mask), result, credit, metrics


def _rows_or_none(values: Tensor | None, order: Tensor) -> Tensor | None:
    return None if values is None else values[order]


def _check_complete(order: list[int], keys: list[tuple[int, int]], column: dict,
                    trajectory_ids: list[str]) -> None:
    """Raise unless every rollout has exactly its steps ``0..T_i − 1``, once each."""
    expected: dict[int, int] = {}
    seen: dict[int, int] = {}
    for r in order:
        rollout, t = keys[r]
        expected.setdefault(rollout, int(column[NUM_STEPS][r]))
        if t != seen.get(rollout, 0):
            raise ValueError(f"trajectory {trajectory_ids[rollout]!r} has step {t} where step "
                             f"{seen.get(rollout, 0)} was due; a rollout's rows must all reach "
                             "the advantage step (do not filter single steps of a rollout).")
        seen[rollout] = t + 1
    short = [trajectory_ids[i] for i, n in seen.items() if n != expected[i]]
    if short:
        i = trajectory_ids.index(short[0])
        raise ValueError(f"trajectory {short[0]!r} has {seen[i]} rows but {expected[i]} steps; "
                         "a rollout's rows must all reach the advantage step.")
