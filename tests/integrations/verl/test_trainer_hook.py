"""The trainer hook gives the embedded trainer's advantages through verl's own steps (issue 17,
"The advantage step").

``AgentCreditTrainer`` runs the v1 trainer's ``_balance_batch``, ``_compute_old_log_prob``
(verl's pass, then ADRS's teacher pass) and ``_compute_advantage`` against an in-memory
TransferQueue that splits and packs rows with TransferQueue's own storage functions. verl's
v1 agent-loop worker (``_agent_loop_postprocess``) writes the rows from the agent loop's
outputs, so their layout is verl 0.9's; ``_balance_batch`` reorders them and appends verl's
padding rows. A fake actor worker group scores sequences with the embedded tiny model as
verl's actor does (log-probs over the whole sequence, entry ``j`` scoring token ``j + 1``).
One rollout of a group is dropped, as the agent loop drops a rollout that raised. VICT's
verifier traces reach the trainer through verl's pydantic dump of the outputs
(``AgentLoopOutput.as_dict``), pickled by the agent loop (``rows.pack_trace``).

The expected advantages, diagnostics and ledger rows come from the embedded trainer's
credit step on the same rollouts (``CreditInputs.prepare``, the estimator,
``CreditResult.per_token``, the write-back both share), never from the hook. Needs verl and
TransferQueue; skipped without them.
"""

from __future__ import annotations

import asyncio
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

if importlib.util.find_spec("verl") is None:
    pytest.skip("verl 0.9 is not importable: pip install agentcredit[verl]",
                allow_module_level=True)

import transfer_queue
from omegaconf import OmegaConf
from tensordict import NonTensorStack, TensorDict
from transfer_queue import KVBatchMeta
from transfer_queue.metadata import extract_field_schema
from transfer_queue.storage.managers.simple_storage_manager import AsyncSimpleStorageManager
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

from agentcredit.credit import CreditResult, get_estimator
from agentcredit.integrations.verl import agent_loop
from agentcredit.integrations.verl.trainer import AgentCreditTrainer
from agentcredit.jsonl_log import read_jsonl
from agentcredit.rollout.collector import RolloutCollector
from agentcredit.skills import SkillProvider
from agentcredit.train.credit_inputs import CreditInputs
from agentcredit.train.model_loading import load_policy
from agentcredit.train.scoring.behaviour_pass import score_steps
from agentcredit.train.step_tensors import tensorize_steps

from .test_equivalence import METHODS, RandomActionPolicy

GROUP_SIZE = 4
TASKS = 3
UPDATE = 3
PARTITION = "train"
#: agentcredit overrides giving each method's estimator and options (``HOOK_METHODS``);
#: ``grpo_overlong`` adds DAPO's overlong penalty: with ``rollout.max_new_tokens=6`` and a
#: buffer of 0.5 every response longer than 3 tokens loses up to 0.1.
SETTINGS = {
    "grpo": ("credit.estimator=grpo",),
    "grpo_overlong": ("credit.estimator=grpo", "rollout.overlong_buffer=0.5",
                      "rollout.overlong_penalty=0.1"),
    "gigpo": ("credit.estimator=gigpo",),
    "vict_gigpo": ("credit.estimator=vict", "credit.options.backbone=gigpo"),
    "adrs_gigpo": ("credit.estimator=adrs", "credit.options.backbone=gigpo"),
}
#: test_equivalence.METHODS, and GRPO for the overlong run
HOOK_METHODS = {**METHODS, "grpo_overlong": METHODS["grpo"]}
SKILLS = {"guide.md": "Walk along the corridor.", "type0.md": "Go right first.",
          "type1.md": "Look for the apple, then take it."}


class FakeTransferQueue:
    """TransferQueue's key-value calls over a dict, one entry per (partition, key).

    A put splits each field into per-row values and a get packs them back with
    TransferQueue's own ``AsyncSimpleStorageManager`` functions, so a response-level field
    comes back as a jagged nested tensor and a non-tensor field as a ``NonTensorStack``.
    """

    def __init__(self):
        self.rows: dict[tuple[str, str], dict] = {}
        self.tags: dict[tuple[str, str], dict] = {}

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None):
        if fields is not None:
            extract_field_schema(fields)  # TransferQueue's check that every field stacks
            for name, column in fields.items():
                values = AsyncSimpleStorageManager._select_by_positions(column,
                                                                        list(range(len(keys))))
                values = values.tolist() if isinstance(values, NonTensorStack) else list(values)
                for key, value in zip(keys, values, strict=True):
                    self.rows.setdefault((partition_id, key), {})[name] = value
        for key, tag in zip(keys, tags or [{}] * len(keys), strict=True):
            self.rows.setdefault((partition_id, key), {})
            self.tags.setdefault((partition_id, key), {}).update(tag)
        names = sorted({name for key in keys for name in self.rows[(partition_id, key)]})
        return KVBatchMeta(keys=list(keys), tags=[dict(self.tags[(partition_id, k)]) for k in keys],
                           partition_id=partition_id, fields=names)

    async def async_kv_batch_put(self, keys, partition_id, fields=None, tags=None):
        return self.kv_batch_put(keys, partition_id, fields, tags)

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        rows = [self.rows[(partition_id, key)] for key in keys]
        names = list(rows[0]) if select_fields is None else list(select_fields)
        for key, row in zip(keys, rows, strict=True):
            missing = [name for name in names if name not in row]
            if missing:
                raise ValueError(f"fields {missing} are not ready for key {key!r}")
        return TensorDict({name: AsyncSimpleStorageManager._pack_field_values(
            [row[name] for row in rows]) for name in names}, batch_size=len(keys))

    def kv_clear(self, keys, partition_id):
        for key in keys:
            self.rows.pop((partition_id, key), None)
            self.tags.pop((partition_id, key), None)


class FakeActorWorkers:
    """verl's actor worker group on two data-parallel ranks, scoring with ``model``.

    ``compute_log_prob`` writes ``log_probs`` over each whole sequence, entry ``j`` the
    log-prob of token ``j + 1`` (what ``response_from_nested`` expects), and ``entropy``.
    """

    def __init__(self, model, queue: FakeTransferQueue):
        self.model, self.queue = model.eval(), queue
        self._dispatch_info = {"actor": [0, 1]}
        self.passes = 0

    def compute_log_prob(self, meta: KVBatchMeta) -> KVBatchMeta:
        self.passes += 1
        data = self.queue.kv_batch_get(meta.keys, meta.partition_id, ["input_ids"])
        scored = [self._log_probs(ids) for ids in data["input_ids"].unbind(0)]
        return self.queue.kv_batch_put(meta.keys, meta.partition_id, TensorDict({
            "log_probs": torch.nested.as_nested_tensor(scored, layout=torch.jagged),
            "entropy": torch.nested.as_nested_tensor([torch.zeros_like(s) for s in scored],
                                                     layout=torch.jagged),
        }, batch_size=len(meta)))

    def _log_probs(self, ids):
        with torch.no_grad():
            logits = self.model(input_ids=ids[None]).logits[0, :-1].float()
        chosen = logits.log_softmax(-1).gather(-1, ids[1:, None])[:, 0]
        return torch.cat([chosen, chosen.new_zeros(1)])


@dataclass
class HookRun:
    """One method through the hook, and the embedded expectation.

    Attributes:
        queue: the TransferQueue after ``_compute_advantage``.
        batch: the batch meta ``_compute_old_log_prob`` returned (balanced, padded).
        keys: the real rows' keys in embedded flat step order.
        expected: the embedded per-token advantages, flat over the response tokens of ``keys``.
        result: the embedded estimator's result.
        metrics: what the trainer's steps logged.
        workers: the fake actor workers (how many scoring passes ran).
        inputs: the inputs the estimator declared (``teacher``, ``traces``).
        rollouts: how many rollouts reached the trainer.
        run_dir: ``trainer.default_local_dir``.
        shaped: what the embedded credit preparation logged (``reward/overlong_*``).
    """

    queue: FakeTransferQueue
    batch: KVBatchMeta
    keys: list[str]
    expected: torch.Tensor
    result: CreditResult
    metrics: dict
    workers: FakeActorWorkers
    inputs: frozenset[str]
    rollouts: int
    run_dir: Path
    shaped: dict


def _put_rollouts(rollouts, traces) -> list[str]:
    """The rollouts' rows as verl's v1 agent-loop worker stores them; returns their keys."""
    # the Ray actor's own class; _agent_loop_postprocess reads only these attributes
    worker = object.__new__(AgentLoopWorkerTQ.__ray_metadata__.modified_class)
    worker.processor, worker.reward_loop_worker_handles, worker.distillation_enabled = (
        None, None, False)
    keys = []
    for (trajectory, session), trace in zip(rollouts, traces, strict=True):
        uid = f"uid{trajectory.group_id}"
        outputs = agent_loop.step_outputs(trajectory, trace, f"{uid}_{session}",
                                          {"min_global_steps": 0, "max_global_steps": 0})
        asyncio.run(worker._agent_loop_postprocess(outputs, False, uid=uid, session_id=session,
                                                   global_steps=UPDATE))
        keys += [f"{uid}_{session}_{t}" for t in range(len(trajectory.steps))]
    return keys


def _trainer(estimator, overrides, tokenizer, workers, run_dir) -> AgentCreditTrainer:
    # the steps under test read only these (test_training_step.py runs verl's own __init__)
    trainer = object.__new__(AgentCreditTrainer)
    trainer.config = OmegaConf.create({
        "agentcredit": {"config": "", "overrides": list(overrides)},
        "algorithm": {"adv_estimator": f"agentcredit.{estimator}", "rollout_correction": None},
        "trainer": {"default_local_dir": str(run_dir), "critic_warmup": 0},
        "data": {"train_batch_size": TASKS},
        "actor_rollout_ref": {
            "rollout": {"n": GROUP_SIZE, "temperature": 1.0, "calculate_log_probs": False},
            "actor": {"ppo_mini_batch_size": TASKS, "ppo_epochs": 1, "shuffle": False,
                      "data_loader_seed": 42, "loss_agg_mode": "token-mean",
                      "loss_scale_factor": None}},
    })
    trainer._run_config = AgentCreditTrainer.check_config(trainer.config)
    trainer.global_steps, trainer.use_reference_policy, trainer.use_critic = UPDATE, False, False
    trainer.tokenizer, trainer.actor_rollout_wg = tokenizer, workers
    return trainer


def _rollouts(setup, tokenizer) -> list[tuple]:
    """``(trajectory, session)`` of ``TASKS`` groups of ``GROUP_SIZE``, but group 0's last
    session (dropped), in the hook's rollout order (trajectory ids sorted), so ledger rows
    name the same rollout index on both paths."""
    collector = RolloutCollector(RandomActionPolicy(tokenizer, seed=3), setup._suite.make_env,
                                 setup.collector)
    collected = collector.collect(setup._suite.tasks("train")[:TASKS], GROUP_SIZE,
                                  temperature=1.0, generator=torch.Generator().manual_seed(0))
    sessions = [(t, sum(u.group_id == t.group_id for u in collected[:i]))
                for i, t in enumerate(collected)]
    return sorted([(t, s) for t, s in sessions if (t.group_id, s) != (0, GROUP_SIZE - 1)],
                  key=lambda r: f"uid{r[0].group_id}_{r[1]}")


def _embedded(setup, model, tokenizer, skill_root, trajectories, estimator, options):
    """The embedded trainer's credit step (``train/update.py``): ``(advantages [S, L], result,
    steps, traces, the preparation's metrics)``."""
    steps = tensorize_steps(trajectories, tokenizer.pad_token_id)
    old = score_steps(model, steps, setup.config.optim.score_micro_batch_size)
    prepared = CreditInputs(setup.config, setup._suite, tokenizer, SkillProvider(skill_root)
                            ).prepare(model, trajectories, steps, old, None, UPDATE)
    result = get_estimator(estimator)(prepared.batch, options)
    advantages = result.per_token(steps.loss_mask)  # the loop's write-back
    return advantages, result, steps, prepared.batch.traces, prepared.metrics


@pytest.fixture(scope="module")
def tiny_policy(fake_model_dir):
    return load_policy(str(fake_model_dir))


@pytest.fixture(scope="module", params=sorted(SETTINGS))
def hook_run(request, tiny_policy, tiny_fake_run, tmp_path_factory) -> HookRun:
    method = request.param
    model, tokenizer = tiny_policy
    estimator, options = HOOK_METHODS[method]
    skill_root = tmp_path_factory.mktemp("skills")
    (skill_root / "fake").mkdir()
    for name, text in SKILLS.items():
        (skill_root / "fake" / name).write_text(text)
    overrides = (*tiny_fake_run, f"skills.root={skill_root}",
                 "optim.mini_batches=1", *SETTINGS[method])
    setup = agent_loop.run_setup("", overrides)
    run_dir = tmp_path_factory.mktemp("run")
    queue = FakeTransferQueue()
    workers = FakeActorWorkers(model, queue)
    trainer = _trainer(estimator, overrides, tokenizer, workers, run_dir)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny forwards: on a busy machine thread hand-offs dominate
    try:
        rollouts = _rollouts(setup, tokenizer)
        expected, result, steps, traces, shaped = _embedded(
            setup, model, tokenizer, skill_root, [t for t, _ in rollouts], estimator, options)
        with pytest.MonkeyPatch.context() as patch:
            for name in ("kv_batch_get", "kv_batch_put", "async_kv_batch_put", "kv_clear"):
                patch.setattr(transfer_queue, name, getattr(queue, name))
            keys = _put_rollouts(rollouts, traces or [None] * len(rollouts))
            metrics = {}
            batch = KVBatchMeta(keys=keys, tags=[queue.tags[(PARTITION, k)] for k in keys],
                                partition_id=PARTITION, extra_info={"temperature": 1.0})
            # the trainer's steps, in _step_once's order
            batch = trainer._balance_batch(batch, metrics)
            batch = trainer._compute_old_log_prob(batch, metrics)
            trainer._compute_advantage(batch, metrics)
    finally:
        torch.set_num_threads(threads)
    return HookRun(queue=queue, batch=batch, keys=keys, expected=expected[steps.loss_mask],
                   result=result, metrics=metrics, workers=workers,
                   inputs=get_estimator(estimator).inputs(options), rollouts=len(rollouts),
                   run_dir=run_dir, shaped=shaped)


def test_the_hook_writes_the_embedded_trainers_advantages_to_every_row(hook_run):
    queue, batch = hook_run.queue, hook_run.batch
    padding = [k for k, tag in zip(batch.keys, batch.tags, strict=True) if tag.get("is_padding")]
    assert padding and batch.keys[:len(hook_run.keys)] != hook_run.keys, \
        "verl's balance step neither padded nor reordered the batch"
    got = torch.cat([queue.rows[(PARTITION, key)]["advantages"] for key in hook_run.keys])
    assert hook_run.expected.abs().sum() > 0, "the rollouts carry no signal"
    torch.testing.assert_close(got, hook_run.expected, atol=1e-6, rtol=0)
    for key in padding:
        assert (queue.rows[(PARTITION, key)]["advantages"] == 0).all()
    for key in batch.keys:
        row = queue.rows[(PARTITION, key)]
        torch.testing.assert_close(row["returns"], row["advantages"])


def test_the_teacher_pass_runs_only_for_a_teacher_estimator_and_clears_its_rows(hook_run):
    assert hook_run.workers.passes == (2 if "teacher" in hook_run.inputs else 1)
    assert not [key for _, key in hook_run.queue.rows if key.endswith("__teacher")]


def test_the_hook_logs_the_estimators_diagnostics_and_the_dropped_rollout(hook_run):
    metrics, diagnostics = hook_run.metrics, hook_run.result.diagnostics
    assert diagnostics
    assert {key for key in metrics if key.startswith("credit/")} == {
        f"credit/{key}" for key in diagnostics}
    for key, value in diagnostics.items():
        if not key.endswith("_ms"):  # wall-clock times differ between any two runs
            assert metrics[f"credit/{key}"] == pytest.approx(float(value), abs=1e-6), key
    assert metrics["agentcredit/rollouts"] == hook_run.rollouts == TASKS * GROUP_SIZE - 1
    assert metrics["agentcredit/dropped_rollouts"] == 1


def test_the_hook_appends_the_embedded_ledger_rows_tagged_with_the_update(hook_run):
    ledger = hook_run.run_dir / "ledger.jsonl"
    expected = hook_run.result.ledger_rows
    if "traces" not in hook_run.inputs:
        assert not expected and not ledger.exists()
        return
    assert expected, "no VICT correction in these rollouts: the ledger check would be empty"
    written = list(read_jsonl(ledger))
    assert len(written) == len(expected)
    for row, want in zip(written, expected, strict=True):
        assert row == {**want, "update": UPDATE} | {
            key: pytest.approx(value, abs=1e-6) for key, value in want.items()
            if isinstance(value, float)}


def test_the_hook_adds_the_overlong_penalty_as_the_embedded_trainer_does(hook_run):
    # the advantages (the first test) and the penalty's figures match the embedded trainer's
    shaped = {k: v for k, v in hook_run.metrics.items() if k.startswith("reward/overlong")}
    assert shaped == pytest.approx(hook_run.shaped)
    if hook_run.shaped:  # grpo_overlong: some response ran into the buffer
        assert hook_run.shaped["reward/overlong_step_share"] > 0
