"""One update's rollouts with their credit, saved for the report's viewer (``run.save_rollouts``).

Every ``run.save_rollouts`` updates, and after the last update, the trainer writes
``rollouts/update_NNNNN.json.gz``: the update's rollouts as they were credited,
so ``agentcredit report`` can show, action by action, what each step saw and did
and which advantage it got, without recomputing anything. The newest
``run.keep_rollouts`` files are kept; texts are cut to ``TEXT_LIMIT`` characters and
state snapshots are not saved, so a file stays a few hundred kilobytes for the
embedded default's 32 rollouts (gzip, JSON inside).

Format ``FORMAT`` (one JSON object)::

    update, estimator          the update (1-based) and the credit estimator's name
    truth                      "solver" when the update was also credit-checked
                               (run.credit_check_every), else null
    step_fields, token_fields  names of the per-step and per-token values below
    rollouts: [{
      rollout, group_id, task_id, task_type, won, outcome_reward, truncated,
      final_observation,
      steps: [{observation, response, action, valid, reward,
               advantage,                 CreditResult.step_advantages[s] (VICT: A^final)
               truth,                     the solver regret g_t the credit check measured
                                          the step's credit against (docs/credit_check.md
                                          §2.1); only when ``truth`` is set
               values: {name: float},     each [S] extra of the CreditResult (VICT:
                                          base_advantage, vict_advantage, correction)
               ledger: [row, ...],        the step's ledger rows (credit/vict/ledger.py)
                                          without the fields the step already names
               tokens: {text: [...], name: [...]}}]   only with teacher scores (ADRS &c.):
                                          each response token's text, teacher_logprob ℓ^T,
                                          behaviour_logprob ℓ^b, token_advantage, and each
                                          [N] extra (ADRS: q_hat, token_gate, teacher_reward …)
      trace: {verifier_id, atoms: [AtomSpec fields], statuses: [[z_{t,j}]] (T+1 rows),
              edges: [ProofEdge fields], delta, f_score, v_score}   VICT runs only
    }]

A value an estimator left non-finite is written as ``null``. A file is written
under a temporary name and renamed when complete, so a kill never leaves half of
one; a resumed run writes the updates it redoes again, with the same content. The
folder and the temporary name are never followed through a link (``run/safe_files.py``).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentcredit.disk_full import writing
from agentcredit.envs.bounded_json import loads
from agentcredit.run.safe_files import new_file, open_regular, own_folder

FORMAT = 1
#: the run directory's folder of saved updates
FOLDER = "rollouts"
#: texts (observations, responses) are cut to this many characters
TEXT_LIMIT = 4000
#: ledger fields a saved step already says (where the credit went)
_STEP_KEYS = ("task_id", "group_id", "rollout", "step", "action", "update")


def rollout_file(folder: Path, update: int) -> Path:
    """``folder/update_NNNNN.json.gz``."""
    return folder / f"update_{update:05d}.json.gz"


def saved_updates(folder: Path) -> list[tuple[int, Path]]:
    """``(update, file)`` of every complete saved update in ``folder``, oldest first."""
    found = []
    for path in folder.glob("update_*.json.gz"):
        number = path.name.removeprefix("update_").removesuffix(".json.gz")
        if number.isdigit():
            found.append((int(number), path))
    return sorted(found)


def save_rollouts(folder: Path, update: int, estimator: str, trajectories: Sequence, batch,
                  credit, tokenizer, keep: int, truth: Sequence[float] | None = None) -> Path:
    """Write update ``update``'s rollouts and credit (see the module docstring); keep the newest
    ``keep`` files.

    Args:
        folder: the run's ``rollouts/``.
        estimator: the credit estimator's name (``credit.estimator``).
        trajectories: the update's ``Trajectory`` records, in batch order.
        batch: their ``CreditBatch`` (traces and token scores when the estimator declared them).
        credit: the estimator's ``CreditResult`` on ``batch``.
        tokenizer: the policy's tokenizer, to show each scored token's text.
        keep: how many saved updates to keep.
        truth: ``[S]`` the solver truth of each step, when the update was credit-checked.
    """
    num_steps = batch.num_steps
    tokens = batch.tokens
    num_tokens = tokens.num_tokens if tokens is not None else -1
    step_values = _vectors(credit.extras, num_steps)
    token_values: dict[str, list] = {}
    if tokens is not None:
        token_values = {"teacher_logprob": tokens.teacher_logprobs.tolist()}
        if tokens.behaviour_logprobs is not None:
            token_values["behaviour_logprob"] = tokens.behaviour_logprobs.tolist()
        if credit.token_advantages is not None:
            token_values["token_advantage"] = credit.token_advantages.tolist()
        token_values.update(_vectors(credit.extras, num_tokens, skip=step_values))
    advantages = credit.step_advantages.tolist()
    ledger: dict[tuple[int, int], list[dict]] = {}
    for row in credit.ledger_rows:
        ledger.setdefault((row["rollout"], row["step"]), []).append(
            {k: _plain(v) for k, v in row.items() if k not in _STEP_KEYS})

    flat = [step for trajectory in trajectories for step in trajectory.steps]
    texts = _token_texts(tokenizer, flat) if tokens is not None else []
    rollouts, s, n = [], 0, 0
    for i, trajectory in enumerate(trajectories):
        steps = []
        for t, step in enumerate(trajectory.steps):
            saved = {"observation": _cut(step.observation), "response": _cut(step.response),
                     "action": step.action, "valid": step.valid, "reward": _number(step.reward),
                     "advantage": _number(advantages[s]),
                     "values": {k: _number(v[s]) for k, v in step_values.items()},
                     "ledger": ledger.get((i, t), [])}
            if truth is not None:
                saved["truth"] = _number(truth[s])
            if tokens is not None:
                count = len(step.response_ids)
                saved["tokens"] = {"text": texts[n:n + count],
                                   **{k: [_number(x) for x in v[n:n + count]]
                                      for k, v in token_values.items()}}
                n += count
            steps.append(saved)
            s += 1
        task = trajectory.task
        rollouts.append({"rollout": i, "group_id": trajectory.group_id, "task_id": task.task_id,
                         "task_type": task.task_type, "won": trajectory.won,
                         "outcome_reward": _number(trajectory.outcome_reward),
                         "truncated": trajectory.truncated,
                         "final_observation": _cut(trajectory.final_observation),
                         "steps": steps,
                         "trace": _trace(batch.traces[i]) if batch.traces is not None else None})
    record = {"format": FORMAT, "update": update, "estimator": estimator,
              "truth": None if truth is None else "solver",
              "step_fields": sorted(step_values), "token_fields": sorted(token_values),
              "rollouts": rollouts}

    final = rollout_file(own_folder(folder), update)  # never a link to another folder
    tmp = final.with_name("." + final.name + ".tmp")
    with (writing(tmp), os.fdopen(new_file(tmp), "wb") as raw,
          gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle):
        handle.write(json.dumps(record, allow_nan=False).encode("ascii"))
    os.replace(tmp, final)
    for _, old in saved_updates(folder)[:-keep]:
        old.unlink(missing_ok=True)
    return final


READ_LIMIT = 256 << 20
"""Most bytes one saved update may expand to when read (one is a few hundred kB)."""


def read_saved_rollouts(path: Path) -> dict[str, Any]:
    """The record of one saved update: a regular file (no link, no FIFO), at most
    ``READ_LIMIT`` bytes once decompressed, JSON within ``bounded_json``'s depth and number
    bounds.

    Raises:
        ValueError: the file is not a complete saved update of this format (the message
            names the file and what is wrong).
    """
    try:
        fd = open_regular(path)
        with os.fdopen(fd, "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as handle:
            data = handle.read(READ_LIMIT + 1)  # a bound: gzip can expand a thousandfold
        if len(data) > READ_LIMIT:
            raise ValueError(f"it expands to more than {READ_LIMIT >> 20} MiB, more than a "
                             "saved update holds")
        record = loads(data.decode("utf-8", errors="replace"))
    except (OSError, EOFError, ValueError, zlib.error) as err:
        raise ValueError(f"{path} is damaged ({err}); the trainer writes a new one at its next "
                         "saved update") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        found = record.get("format") if isinstance(record, dict) else type(record).__name__
        raise ValueError(f"{path} has format {found!r}, this version reads format {FORMAT}")
    return record


def _vectors(extras: dict, length: int, skip: dict | None = None) -> dict[str, list]:
    """The 1-D tensors of ``extras`` with ``length`` entries, as lists (``skip``: names taken)."""
    return {name: value.tolist() for name, value in sorted(extras.items())
            if name not in (skip or {}) and getattr(value, "dim", lambda: 0)() == 1
            and value.shape[0] == length}


def _token_texts(tokenizer, steps: Sequence) -> list[str]:
    """Every response token's own text, the steps' tokens one after another."""
    ids = [[token] for step in steps for token in step.response_ids]
    return tokenizer.batch_decode(ids, skip_special_tokens=False) if ids else []


def _trace(trace) -> dict[str, Any]:
    return {"verifier_id": trace.verifier_id,
            "atoms": [dataclasses.asdict(a) for a in trace.atoms],
            "statuses": [[z.value for z in row] for row in trace.statuses],
            "edges": [dataclasses.asdict(e) for e in trace.edges],
            "delta": [_number(d) for d in trace.delta],
            "f_score": _number(trace.f_score), "v_score": _number(trace.v_score)}


def _cut(text: str | None) -> str:
    text = text or ""
    if len(text) <= TEXT_LIMIT:
        return text
    return text[:TEXT_LIMIT] + f" … [{len(text) - TEXT_LIMIT} characters cut]"


def _number(value: Any) -> float | None:
    value = float(value)
    return round(value, 5) if math.isfinite(value) else None


def _plain(value: Any) -> Any:
    return _number(value) if isinstance(value, float) else value
