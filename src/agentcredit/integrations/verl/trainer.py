"""The trainer hook: verl 0.9's v1 ``PPOTrainer`` with the project's advantage step
(docs/verl.md, "The advantage step").

verl 0.9 lets a plugin register a trainer class (``register_trainer``), chosen with
``trainer.use_v1=true trainer.v1.trainer_mode=agentcredit``; the class overrides two
of the trainer's steps and nothing else, so verl is not forked:

- ``_compute_old_log_prob``: verl's pass, then, when the estimator declares ``teacher``
  (ADRS), a second log-prob pass of the same actor over skill-prefixed prompts
  (``skills.SkillSplicer``, the embedded trainer's splice) whose response log-probs
  become ``ℓ^T`` (``rows.TEACHER``). It runs on the actor workers, before the update, so
  ``ℓ^T`` comes from the frozen behaviour snapshot as in ``train/privileged.py``.
- ``_compute_advantage``: reads the per-step rows (``rows.STEP_FIELDS``, which verl's v1
  agent loop stores in each row's ``extra_fields``) from the TransferQueue, runs the
  project's estimator (``rows.compute_row_credit``, the same registry as ``agentcredit
  train``), writes the per-token advantages back (0 on the padding rows ``_balance_batch``
  adds), logs the estimator's diagnostics as ``credit/*`` and appends VICT's ledger rows
  to ``<trainer.default_local_dir>/ledger.jsonl``.

Not run here on GPUs: a real run needs Ray workers and a TransferQueue. On CPU,
test_trainer_hook.py runs these steps against an in-memory TransferQueue and fake actor
workers; test_equivalence.py covers the conversion and test_plugin.py the registration.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import torch
import transfer_queue as tq
from tensordict import TensorDict
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.tensordict_utils import list_of_dict_to_tensordict
from verl.workers.utils.padding import response_from_nested, response_to_nested

from agentcredit.credit import get_estimator
from agentcredit.integrations.verl import rows
from agentcredit.integrations.verl.agent_loop import agentcredit_settings, run_setup
from agentcredit.jsonl_log import JsonlLog
from agentcredit.skills import SkillProvider, SkillSplicer
from agentcredit.train.config import estimator_config

#: the name this trainer is registered under (``trainer.v1.trainer_mode``).
TRAINER_NAME = "agentcredit"
#: verl's ``algorithm.adv_estimator`` for the project's estimator ``name``: the prefix + name.
ESTIMATOR_PREFIX = "agentcredit."


@register_trainer(TRAINER_NAME)
class AgentCreditTrainer(PPOTrainerSync):
    """verl's synchronous v1 trainer whose advantage step is agentcredit's (module docs)."""

    # SETUP

    def _credit(self):
        """``(run setup, estimator name, its options)``; checks verl's ``adv_estimator``."""
        setup = run_setup(*agentcredit_settings(self.config))
        name = setup.config.credit.estimator
        chosen = str(self.config.algorithm.adv_estimator)
        if chosen != ESTIMATOR_PREFIX + name:
            raise ValueError(f"algorithm.adv_estimator={chosen} but the agentcredit config's "
                             f"credit.estimator is {name!r}; set algorithm.adv_estimator="
                             f"{ESTIMATOR_PREFIX}{name}.")
        return setup, name, estimator_config(setup.config.credit)

    # TEACHER PASS (ADRS)

    def _compute_old_log_prob(self, batch, metrics):
        batch = super()._compute_old_log_prob(batch, metrics)
        setup, name, options = self._credit()
        if "teacher" in get_estimator(name).inputs(options):
            self._teacher_pass(batch, setup)
        return batch

    def _teacher_pass(self, batch, setup) -> None:
        """``ℓ^T``: the actor's log-probs of each response after the task's skill prefix."""
        if not hasattr(self, "_splicer"):
            self._splicer = SkillSplicer(self.tokenizer, setup.config.rollout.max_prompt_tokens)
            self._skills = SkillProvider(setup.config.skills.root or None)
        real = [batch.keys[i] for i in _real_rows(batch)]
        data = tq.kv_batch_get(keys=real, partition_id=batch.partition_id,
                               select_fields=["prompts", "responses", "extra_fields"])
        skills = [extra[rows.SKILL] for extra in _column(data, "extra_fields")]
        fields = []
        for prompt, response, skill in zip(data["prompts"].unbind(0), data["responses"].unbind(0),
                                           skills, strict=True):
            env, task_type = str(skill).split("/", 1)
            prompt_ids = self._splicer.privileged_prompt_ids(
                prompt.tolist(), self._skills.text_for(env, task_type))
            prompts = torch.tensor(prompt_ids, dtype=torch.long)
            input_ids = torch.cat([prompts, response])
            fields.append({"prompts": prompts, "responses": response, "input_ids": input_ids,
                           "attention_mask": torch.ones_like(input_ids),
                           "position_ids": torch.arange(input_ids.numel()),
                           "response_mask": torch.ones_like(response),
                           "loss_mask": torch.ones_like(response)})
        keys = [f"{key}__teacher" for key in real]
        # ragged rows: nested tensors, as verl's agent loop stores them (a lazy stack of
        # ragged TensorDicts is refused by the TransferQueue)
        teacher = tq.kv_batch_put(keys=keys, partition_id=batch.partition_id,
                                  fields=list_of_dict_to_tensordict(fields))
        teacher.extra_info.update({**batch.extra_info, "calculate_entropy": False,
                                   "compute_loss": False})
        self.actor_rollout_wg.compute_log_prob(teacher)
        scored = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id,
                                 select_fields=["log_probs", "response_mask"])
        tq.kv_clear(keys, batch.partition_id)
        # the teacher rows' responses are the originals, so their response-level log-probs
        # are already aligned with the original rows
        tq.kv_batch_put(keys=real, partition_id=batch.partition_id, fields=TensorDict(
            {rows.TEACHER: response_from_nested(scored["log_probs"], scored["response_mask"])},
            batch_size=len(real)))

    # ADVANTAGE STEP

    def _compute_advantage(self, batch, metrics):
        _, name, options = self._credit()
        inputs = get_estimator(name).inputs(options)
        tensors = ["response_mask", "old_log_probs"]
        tensors += ["ref_log_prob"] if self.use_reference_policy else []
        tensors += [rows.TEACHER] if "teacher" in inputs else []
        real = _real_rows(batch)
        data = tq.kv_batch_get(keys=[batch.keys[i] for i in real],
                               partition_id=batch.partition_id,
                               select_fields=[rows.GROUP, "extra_fields", *tensors])

        def padded(field):  # response-level nested rows -> [R, L], 0 past each response
            return data[field].to_padded_tensor(0) if field in data else None

        step_rows = rows.StepRows(
            fields=_step_fields(data), response_mask=padded("response_mask"),
            old_log_probs=padded("old_log_probs"), ref_log_prob=padded("ref_log_prob"),
            teacher_log_probs=padded(rows.TEACHER))
        advantages, result, credit = rows.compute_row_credit(step_rows, name, options,
                                                             update=self.global_steps)
        metrics.update({f"credit/{key}": value for key, value in result.diagnostics.items()})
        metrics["agentcredit/rollouts"] = credit.batch.num_rollouts
        metrics["agentcredit/dropped_rollouts"] = self._dropped(credit)
        if result.ledger_rows:
            ledger = Path(self.config.trainer.default_local_dir) / "ledger.jsonl"
            ledger.parent.mkdir(parents=True, exist_ok=True)
            log = JsonlLog(ledger)
            log.append(result.ledger_rows, update=self.global_steps)
            log.close()
        # verl's padding rows (``_balance_batch``) train on nothing: advantage 0
        out = torch.zeros(len(batch), advantages.shape[1])
        out[real] = advantages
        response_mask = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                                        select_fields=["response_mask"])["response_mask"]
        nested = response_to_nested(out, response_mask)
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                               fields=TensorDict({"advantages": nested, "returns": nested},
                                                 batch_size=len(batch)))

    def _dropped(self, credit: rows.RowCredit) -> int:
        """Sessions missing from the groups that reached this step (their loop dropped them)."""
        per_group = Counter(int(g) for g in credit.batch.group_ids)
        return sum(self.config.actor_rollout_ref.rollout.n - n for n in per_group.values())


def _real_rows(batch) -> list[int]:
    """The batch's rows but verl's padding rows (tagged ``is_padding`` by ``_balance_batch``;
    they copy a real row's fields, so they would repeat its step)."""
    return [i for i, tag in enumerate(batch.tags) if not tag.get("is_padding", False)]


def _step_fields(data: TensorDict) -> dict[str, list]:
    """``rows.GROUP`` and the ``rows.STEP_FIELDS`` of each row. verl 0.9's v1 agent loop
    stores an output's ``extra_fields`` as one dict per row; a field that some row lacks is
    left out, so ``rows.credit_batch_from_rows`` names it."""
    extras = _column(data, "extra_fields")
    fields = {rows.GROUP: _column(data, rows.GROUP)}
    fields.update({name: [extra[name] for extra in extras] for name in rows.STEP_FIELDS
                   if all(name in extra for extra in extras)})
    return fields


def _column(data: TensorDict, field: str) -> list:
    """A non-tensor field of a TransferQueue batch as a Python list."""
    value = data[field]
    return list(value.tolist() if hasattr(value, "tolist") else np.asarray(value, dtype=object))
