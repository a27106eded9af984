"""The trainer hook: verl 0.9's v1 ``PPOTrainer`` with the project's advantage step
(docs/verl.md, "The advantage step", "Mini-batches").

verl 0.9 lets a plugin register a trainer class (``register_trainer``), chosen with
``trainer.use_v1=true trainer.v1.trainer_mode=agentcredit``. The class is verl's synchronous
trainer (``trainer_mode`` reads ``sync`` whatever name chose it, since verl branches on
``trainer_mode != "sync"``: its async replay buffer, one-prompt fetches, TransferQueue state in
checkpoints) and overrides these steps, so verl is not forked:

- ``_compute_old_log_prob``: verl's pass, then, when the estimator declares ``teacher``
  (ADRS), a second log-prob pass of the same actor over skill-prefixed prompts
  (``skills.SkillSplicer``, the embedded trainer's splice) whose response log-probs
  become ``ℓ^T`` (``rows.TEACHER``). It runs on the actor workers, before the update, so
  ``ℓ^T`` comes from the frozen behaviour snapshot as in ``train/scoring/teacher.py``.
- ``_compute_advantage``: reads the per-step rows (``rows.STEP_FIELDS``, which verl's v1
  agent loop stores in each row's ``extra_fields``) from the TransferQueue, runs the
  project's estimator (``rows.compute_row_credit``, the same registry as ``agentcredit
  train``, after DAPO's overlong penalty when ``rollout.overlong_buffer`` is set), writes
  the per-token advantages back (0 on verl's padding rows), logs the estimator's
  diagnostics as ``credit/*`` (and ``reward/overlong_*``) and appends VICT's ledger rows to
  ``<trainer.default_local_dir>/ledger.jsonl``.
- ``_balance_batch`` and ``_update_actor``: a mini-batch counts step rows, as in ``agentcredit
  train``. Every row is one step, so verl's own sizing (``ppo_mini_batch_size × rollout.n``
  rows) would make one optimiser step per ``ppo_mini_batch_size × n`` steps, some thirty per
  update with thirty-step rollouts. Here an update makes ``optim.mini_batches`` optimiser
  steps (``M``, which ``ppo_mini_batch_size = train_batch_size / M`` must agree with), the
  shuffled real rows split into ``M`` shares exactly as ``ppo_update`` splits them
  (``mini_batch_layout``), each share filled with verl's no-token padding rows to an equal
  size and balanced over the data-parallel ranks by tokens.

Not run here on GPUs: a real run needs Ray workers and a TransferQueue. On CPU,
test_training_step.py runs a whole step (verl's ``PPOTrainer.step``, ``_compute_metrics``,
checkpoint save and resume) against an in-memory TransferQueue and fake worker groups;
test_trainer_hook.py checks the hook's steps one by one, test_launch.py the launch configs.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import torch
import transfer_queue as tq
from tensordict import TensorDict
from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.seqlen_balancing import (
    calculate_workload,
    get_seqlen_balanced_partitions,
    log_seqlen_unbalance,
)
from verl.utils.tensordict_utils import list_of_dict_to_tensordict
from verl.workers.utils.padding import response_from_nested, response_to_nested

from agentcredit.config import TrainConfig, estimator_config, load_config
from agentcredit.credit.overlong import OverlongPenalty
from agentcredit.integrations.verl import ESTIMATOR_PREFIX, PLUGIN_NAME, rows
from agentcredit.integrations.verl.agent_loop import agentcredit_settings, run_setup
from agentcredit.integrations.verl.supported import check_supported
from agentcredit.jsonl_log import JsonlLog
from agentcredit.skills import SkillProvider, SkillSplicer

#: the name this trainer is registered under (``trainer.v1.trainer_mode``).
TRAINER_NAME = PLUGIN_NAME
#: verl's synchronous trainer mode, the one this trainer runs in.
SYNC = "sync"


@register_trainer(TRAINER_NAME)
class AgentCreditTrainer(PPOTrainerSync):
    """verl's synchronous v1 trainer whose advantage step is agentcredit's (module docs)."""

    # SETUP

    def __init__(self, config):
        self._run_config = self.check_config(config)
        super().__init__(config)

    @property
    def trainer_mode(self) -> str:
        """``sync``: the mode verl's branches on ``trainer_mode`` must take for this trainer."""
        return SYNC

    @trainer_mode.setter
    def trainer_mode(self, chosen: str) -> None:
        # PPOTrainer.__init__ stores the name that chose the trainer; the mode stays sync
        if chosen not in (TRAINER_NAME, SYNC):
            raise ValueError(f"trainer.v1.trainer_mode={chosen} cannot run agentcredit's "
                             f"trainer; set trainer.v1.trainer_mode={TRAINER_NAME}")

    @classmethod
    def check_config(cls, config) -> TrainConfig:
        """The run's agentcredit config, once verl's ``config`` agrees with it: the
        estimator, the mini-batches and a one-epoch, unshuffled update (module docs).
        Raises ``ValueError`` naming the key to set."""
        run = load_config(*_config_source(config))
        check_supported(run)
        name = run.credit.estimator
        chosen = str(config.algorithm.adv_estimator)
        if chosen != ESTIMATOR_PREFIX + name:
            raise ValueError(f"algorithm.adv_estimator={chosen} but the agentcredit config's "
                             f"credit.estimator is {name!r}; set algorithm.adv_estimator="
                             f"{ESTIMATOR_PREFIX}{name}.")
        actor, mini_batches = config.actor_rollout_ref.actor, run.optim.mini_batches
        tasks = config.data.train_batch_size
        if tasks % mini_batches:
            raise ValueError(f"the agentcredit config's optim.mini_batches={mini_batches} must "
                             f"divide data.train_batch_size={tasks} (verl counts a mini-batch "
                             "in task groups)")
        if actor.ppo_mini_batch_size * mini_batches != tasks:
            raise ValueError(
                f"actor_rollout_ref.actor.ppo_mini_batch_size={actor.ppo_mini_batch_size} does "
                f"not split data.train_batch_size={tasks} into the agentcredit config's "
                f"optim.mini_batches={mini_batches}; set ppo_mini_batch_size="
                f"{tasks // mini_batches} or change optim.mini_batches.")
        if actor.ppo_epochs != 1 or actor.shuffle:
            raise ValueError(f"actor_rollout_ref.actor.ppo_epochs={actor.ppo_epochs} "
                             f"shuffle={actor.shuffle}: agentcredit's update is one epoch over "
                             "mini-batches it lays out itself; set ppo_epochs=1 shuffle=false.")
        return run

    def _credit(self):
        """``(run setup, estimator name, its options)``."""
        setup = run_setup(*agentcredit_settings(self.config))
        return setup, setup.config.credit.estimator, estimator_config(setup.config.credit)

    # TEACHER PASS (ADRS)

    def _compute_old_log_prob(self, batch, metrics):
        batch = super()._compute_old_log_prob(batch, metrics)
        setup, _, _ = self._credit()
        if "teacher" in setup.config.inputs:  # the one rule the embedded trainer reads too
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
        setup, name, options = self._credit()
        inputs = setup.config.inputs
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
        advantages, result, credit, shaped = rows.compute_row_credit(
            step_rows, name, options, update=self.global_steps,
            overlong=OverlongPenalty.of(setup.config.rollout))
        metrics.update(shaped)
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

    # MINI-BATCHES

    def _get_required_batch_multiple(self, dp_size: int) -> int:
        """Rows the batch is padded to a multiple of: ``M`` mini-batches whose rows split over
        ``dp_size`` ranks and, since verl sizes a mini-batch as ``ppo_mini_batch_size ×
        rollout.n`` rows, a multiple of ``n`` each."""
        n = self.config.actor_rollout_ref.rollout.n
        return self._run_config.optim.mini_batches * math.lcm(dp_size, n)

    def _balance_batch(self, batch, metrics, logging_prefix="global_seqlen", keep_minibatch=False):
        """verl's padding rows, then ``mini_batch_layout``'s order (module docs)."""
        role, workers = "actor", self.actor_rollout_wg
        if role not in workers._dispatch_info:
            workers._dispatch_info[role] = workers._query_dispatch_info(role)
        dp_size = max(workers._dispatch_info[role]) + 1
        batch = upsample_batch_to_divisible_size(batch, self._get_required_batch_multiple(dp_size),
                                                 self.tokenizer.eos_token_id)
        seq_lens = [int(tag["seq_len"]) for tag in batch.tags]
        seed = int(self.config.actor_rollout_ref.actor.data_loader_seed) + int(self.global_steps)
        order, ranks = mini_batch_layout(
            seq_lens, [bool(tag.get("is_padding", False)) for tag in batch.tags],
            self._run_config.optim.mini_batches, dp_size, torch.Generator().manual_seed(seed))
        batch.reorder(order)
        metrics.update(log_seqlen_unbalance(seqlen_list=seq_lens, partitions=ranks,
                                            prefix=logging_prefix))
        return batch

    def _update_actor(self, batch, metrics):
        """verl's update with ``ppo_mini_batch_size`` set for this batch to ``1/M`` of its
        rows (verl multiplies it by ``rollout.n``), so verl's worker makes ``M`` steps."""
        actor = self.config.actor_rollout_ref.actor
        chosen = actor.ppo_mini_batch_size
        actor.ppo_mini_batch_size = len(batch) // (self._run_config.optim.mini_batches
                                                   * self.config.actor_rollout_ref.rollout.n)
        try:
            return super()._update_actor(batch, metrics)
        finally:
            actor.ppo_mini_batch_size = chosen


def mini_batch_layout(seq_lens: list[int], padding: list[bool], mini_batches: int,
                      data_parallel: int, generator: torch.Generator
                      ) -> tuple[list[int], list[list[int]]]:
    """verl's row order for one update, and each data-parallel rank's rows.

    The real rows, shuffled with ``generator``, split into ``mini_batches`` shares as the
    embedded ``ppo_update`` splits its rows (``tensor_split``: sizes differ by at most one,
    the larger first); each share is filled with padding rows to ``len / mini_batches`` rows
    and split over the ``data_parallel`` ranks by tokens (verl's
    ``get_seqlen_balanced_partitions``). Rank ``r``'s rows of every mini-batch, in mini-batch
    order, make up the ``r``-th contiguous chunk: verl's dispatch hands rank ``r`` that chunk
    and its ``make_iterator`` (unshuffled) cuts it into the mini-batches in order. Needs
    ``len(seq_lens)`` to be a multiple of ``mini_batches × data_parallel``.
    """
    real = [i for i, pad in enumerate(padding) if not pad]
    pads = [i for i, pad in enumerate(padding) if pad]
    size = len(seq_lens) // mini_batches
    ranks: list[list[int]] = [[] for _ in range(data_parallel)]
    shuffled = torch.tensor(real, dtype=torch.long)[torch.randperm(len(real), generator=generator)]
    for share in shuffled.tensor_split(mini_batches):
        taken = share.tolist() + [pads.pop() for _ in range(size - len(share))]
        workload = calculate_workload(torch.tensor([seq_lens[i] for i in taken]))
        for rank, part in enumerate(get_seqlen_balanced_partitions(
                workload, k_partitions=data_parallel, equal_size=True)):
            ranks[rank] += [taken[j] for j in part]
    return [i for rank in ranks for i in rank], ranks


def _real_rows(batch) -> list[int]:
    """The batch's rows but verl's padding rows (tagged ``is_padding`` by ``_balance_batch``;
    they copy a real row's fields, so they would repeat its step)."""
    return [i for i, tag in enumerate(batch.tags) if not tag.get("is_padding", False)]


def _config_source(config) -> tuple[str | None, list[str]]:
    """``load_config``'s arguments for verl's ``agentcredit`` section."""
    name, overrides = agentcredit_settings(config)
    return name or None, list(overrides)


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
