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
- ``_compute_advantage``: reads the per-step rows (``rows.STEP_FIELDS``) from the
  TransferQueue, runs the project's estimator (``rows.compute_row_credit``, the same
  registry as ``agentcredit train``), writes the per-token advantages back, logs the
  estimator's diagnostics as ``credit/*`` and appends VICT's ledger rows to
  ``<trainer.default_local_dir>/ledger.jsonl``.

Not run here: this module needs GPUs, Ray workers and a TransferQueue; the CPU tests
cover the conversion it calls (test_equivalence.py) and its registration (test_plugin.py).
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
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=["prompts", "responses", rows.SKILL])
        fields = []
        for prompt, response, skill in zip(data["prompts"].unbind(0), data["responses"].unbind(0),
                                           _column(data, rows.SKILL), strict=True):
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
        keys = [f"{key}__teacher" for key in batch.keys]
        teacher = tq.kv_batch_put(keys=keys, partition_id=batch.partition_id,
                                  fields=TensorDict.lazy_stack(
                                      [TensorDict(f) for f in fields]))
        teacher.extra_info.update({**batch.extra_info, "calculate_entropy": False,
                                   "compute_loss": False})
        self.actor_rollout_wg.compute_log_prob(teacher)
        scored = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id,
                                 select_fields=["log_probs", "response_mask"])
        tq.kv_clear(keys, batch.partition_id)
        log_probs = response_from_nested(scored["log_probs"], scored["response_mask"])
        original = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                                   select_fields=["response_mask"])
        tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=TensorDict(
            {rows.TEACHER: response_to_nested(log_probs, original["response_mask"])},
            batch_size=len(batch)))

    # ADVANTAGE STEP

    def _compute_advantage(self, batch, metrics):
        _, name, options = self._credit()
        inputs = get_estimator(name).inputs(options)
        wanted = ["uid", "response_mask", "old_log_probs", "ref_log_prob", *rows.STEP_FIELDS]
        wanted += [rows.TEACHER] if "teacher" in inputs else []
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=[f for f in wanted if f != "ref_log_prob"
                                              or self.use_reference_policy])
        nested_mask = data["response_mask"]
        mask = response_from_nested(nested_mask, nested_mask)

        def padded(field):
            return response_from_nested(data[field], nested_mask) if field in data else None

        step_rows = rows.StepRows(
            fields={field: _column(data, field) for field in (rows.GROUP, *rows.STEP_FIELDS)},
            response_mask=mask, old_log_probs=padded("old_log_probs"),
            ref_log_prob=padded("ref_log_prob"), teacher_log_probs=padded(rows.TEACHER))
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
        nested = response_to_nested(advantages, nested_mask)
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                               fields=TensorDict({"advantages": nested, "returns": nested},
                                                 batch_size=len(batch)))

    def _dropped(self, credit: rows.RowCredit) -> int:
        """Sessions missing from the groups that reached this step (their loop dropped them)."""
        per_group = Counter(int(g) for g in credit.batch.group_ids)
        return sum(self.config.actor_rollout_ref.rollout.n - n for n in per_group.values())


def _column(data: TensorDict, field: str) -> list:
    """A non-tensor field of a TransferQueue batch as a Python list."""
    value = data[field]
    return list(value.tolist() if hasattr(value, "tolist") else np.asarray(value, dtype=object))
