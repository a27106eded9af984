"""One whole v1 training step of the agentcredit trainer through verl's own code, on CPU
(docs/verl.md, "What is proven on CPU").

The verl config is composed from the launcher's overrides (``launch.plan``, the code behind
``examples/verl/launch.sh``) for the tiny corridor run on two data-parallel ranks with two
mini-batches per update, and the trainer is built by verl's own ``PPOTrainer.__init__``.
Then ``PPOTrainer.step`` runs as ``fit`` runs it: the dataloader batch goes to the rollout
(verl's ``AgentLoopWorkerTQ``, built by its own ``__init__``, runs the agentcredit agent loop
through verl's ``LLMServerClient`` and postprocesses its outputs into the TransferQueue), the
replay buffer samples it, and the trainer balances it, scores old log-probs (with ADRS's
teacher pass) and reference log-probs, computes the advantages and calls the actor update;
then ``_compute_metrics``, ``_save_checkpoint`` and, in a second trainer,
``_load_checkpoint``. Fakes stand in only where a GPU or a rollout server is needed: the
rollout server and its load balancer (random corridor actions), the actor and reference
worker groups (the tiny model scores; the update records the mini-batches verl's
``train_mini_batch`` would make, with verl's own ``make_iterator``), and the TransferQueue (a
dict, packing rows with TransferQueue's own functions). The dataset is the train tasks as
rows of verl's dataset layout, batched with verl's ``collate_fn``. One rollout's server
fails, so the loop drops it.

The expected advantages and the optimiser steps per update come from the embedded trainer on
the same rollouts (its credit step, fed the log-probs verl's passes scored, and
``ppo_update``), the rows per mini-batch from splitting the update's rows as evenly as
possible; the embedded scoring passes are checked against verl's apart. Needs verl; skipped
without it.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

if importlib.util.find_spec("verl") is None:
    pytest.skip("verl 0.9 is not importable: pip install agentcredit[verl]",
                allow_module_level=True)

import transfer_queue
from tensordict import TensorDict
from torchdata.stateful_dataloader import StatefulDataLoader
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.rl_dataset import collate_fn
from verl.workers.rollout.llm_server import LLMServerClient
from verl.workers.rollout.replica import TokenOutput

from agentcredit.config import estimator_config
from agentcredit.credit import get_estimator
from agentcredit.integrations.verl import agent_loop, launch
from agentcredit.integrations.verl import rows as verl_rows
from agentcredit.integrations.verl.trainer import AgentCreditTrainer
from agentcredit.skills import SkillProvider
from agentcredit.train import credit_inputs
from agentcredit.train.model_loading import load_policy
from agentcredit.train.ppo import PPOBatch, ppo_update
from agentcredit.train.scoring.behaviour_pass import score_steps
from agentcredit.train.step_tensors import tensorize_steps

from .test_equivalence import RandomActionPolicy
from .test_trainer_hook import SKILLS, FakeTransferQueue

GROUP_SIZE = 4
TASKS = 2
MINI_BATCHES = 2
DATA_PARALLEL = 2
#: the launcher's METHOD for each method the embedded trainer is compared on.
METHODS = ("grpo", "gigpo", "vict", "adrs")


class Queue(FakeTransferQueue):
    """The key-value TransferQueue with what the trainer's whole step calls besides: tags
    of prompts (``kv_list``, ``async_kv_put``), fields absent from every row dropped from a
    get (as TransferQueue's ``select_fields`` drops them), and checkpoint calls recorded."""

    def __init__(self):
        super().__init__()
        self.checkpoints: list[str] = []

    def kv_list(self, partition_id=None):
        out: dict[str, dict] = {}
        for (partition, key), tag in self.tags.items():
            if partition_id is None or partition == partition_id:
                out.setdefault(partition, {})[key] = dict(tag)
        return out

    async def async_kv_put(self, key, partition_id, tag=None, fields=None):
        return self.kv_batch_put([key], partition_id, fields, [tag or {}])

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        if select_fields is not None:
            rows = [self.rows[(partition_id, key)] for key in keys]
            select_fields = [name for name in select_fields if any(name in r for r in rows)]
        return super().kv_batch_get(keys, partition_id, select_fields)

    def save_checkpoint(self, path, metadata=None):
        self.checkpoints.append(f"save {path}")

    def load_checkpoint(self, path):
        self.checkpoints.append(f"load {path}")


class Remote:
    """A Ray actor method: ``.remote(...)`` calls ``fn``."""

    def __init__(self, fn):
        self.remote = fn


class FakeServers:
    """verl's rollout load balancer and server: answers with random corridor actions (so the
    groups' returns differ), reporting weights version 0 (``on_init_end``'s sync before step
    1) as vLLM's server does. The first rollout of a group's last session to ask gets a server
    that raises, so exactly one rollout is dropped."""

    def __init__(self, tokenizer):
        self.policy = RandomActionPolicy(tokenizer, seed=3)
        self.failing: str | None = None
        self.require_acquire_fields = Remote(self._no_fields)
        self.require_release_fields = Remote(self._no_fields)
        self.acquire_server = Remote(self._acquire)
        self.release_server = Remote(lambda server_id, **_: None)

    async def _no_fields(self):
        return []

    async def _acquire(self, request_id):
        # request ids are the loop's trajectory ids, "{uid}_{session}"
        if self.failing is None and request_id.endswith(f"_{GROUP_SIZE - 1}"):
            self.failing = request_id
        broken = request_id == self.failing
        return ("broken" if broken else "tiny"), SimpleNamespace(
            generate=Remote(self._broken if broken else self._generate))

    async def _generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        (gen,) = self.policy.generate([prompt_ids], temperature=sampling_params["temperature"],
                                      max_new_tokens=sampling_params["max_tokens"],
                                      generator=None)
        return TokenOutput(token_ids=gen.token_ids, log_probs=gen.logprobs,
                           extra_fields={"global_steps": 0})

    async def _broken(self, **kwargs):
        raise ConnectionError("the rollout server went away")


class FakeWorkers:
    """verl's actor (or reference) worker group on ``DATA_PARALLEL`` ranks, scoring with the
    tiny model; ``update_actor`` splits the batch over the ranks as verl's dispatch does and
    each rank's rows into mini-batches with verl's ``make_iterator``, as ``train_mini_batch``
    does, recording each optimiser step's rows."""

    def __init__(self, model, queue: Queue):
        self.model, self.queue = model.eval(), queue
        self._dispatch_info = {"actor": list(range(DATA_PARALLEL))}
        self.steps: list[list[str]] = []
        self.checkpoint: tuple | None = None
        self.loaded: str | None = None

    def compute_log_prob(self, meta: KVBatchMeta) -> KVBatchMeta:
        data = self.queue.kv_batch_get(meta.keys, meta.partition_id, ["input_ids"])
        scored = [self._log_probs(ids) for ids in data["input_ids"].unbind(0)]
        return self.queue.kv_batch_put(meta.keys, meta.partition_id, TensorDict({
            "log_probs": torch.nested.as_nested_tensor(scored, layout=torch.jagged),
            "entropy": torch.nested.as_nested_tensor([torch.zeros_like(s) for s in scored],
                                                     layout=torch.jagged),
        }, batch_size=len(meta)))

    compute_ref_log_prob = compute_log_prob

    def _log_probs(self, ids):
        with torch.no_grad():
            logits = self.model(input_ids=ids[None]).logits[0, :-1].float()
        chosen = logits.log_softmax(-1).gather(-1, ids[1:, None])[:, 0]
        return torch.cat([chosen, chosen.new_zeros(1)])

    def update_actor(self, meta: KVBatchMeta) -> dict:
        info = meta.extra_info
        # the fields verl's PPO loss reads, on every row
        self.queue.kv_batch_get(meta.keys, meta.partition_id,
                                ["response_mask", "old_log_probs", "advantages", "ref_log_prob"])
        assert info["mini_batch_size"] % DATA_PARALLEL == 0
        per_rank = len(meta) // DATA_PARALLEL
        steps: dict[int, list[str]] = {}
        for rank in range(DATA_PARALLEL):
            keys = meta.keys[rank * per_rank:(rank + 1) * per_rank]
            rows = TensorDict({"row": torch.arange(len(keys))}, batch_size=len(keys))
            for step, mini in enumerate(tu.make_iterator(
                    rows, mini_batch_size=info["mini_batch_size"] // DATA_PARALLEL,
                    epochs=info["epochs"], seed=info["seed"] + rank,
                    dataloader_kwargs=info["dataloader_kwargs"])):
                steps.setdefault(step, []).extend(keys[i] for i in mini["row"].tolist())
        self.steps = [steps[step] for step in sorted(steps)]
        return {"metrics": {"mfu": [0.0], "grad_norm": [1.0]}}

    def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None):
        Path(local_path).mkdir(parents=True, exist_ok=True)
        self.checkpoint = (local_path, global_step)

    def load_checkpoint(self, local_path, hdfs_path=None, del_local_after_load=False):
        self.loaded = local_path


@dataclass
class Step:
    """One whole training step and what it left behind.

    Attributes:
        queue: the TransferQueue after the step.
        batch: the batch ``PPOTrainer.step`` returned.
        metrics: the step's metrics and ``_compute_metrics``'.
        workers: the actor worker group (the update's mini-batches, the checkpoint).
        played: trajectory id -> ``(trajectory, trace)`` the agent loop played.
        config: the verl config.
        setup: the run's agentcredit setup.
        skill_root: the skill texts of ADRS's teacher pass.
        trainer: the trainer.
        resumed: a second trainer after ``_load_checkpoint``.
        reissued: prompts the resumed trainer re-issued.
    """

    queue: Queue
    batch: KVBatchMeta
    metrics: dict
    workers: FakeWorkers
    played: dict
    config: object
    setup: agent_loop.RunSetup
    skill_root: Path
    trainer: AgentCreditTrainer
    resumed: AgentCreditTrainer
    reissued: int


def _dataloader(setup, batch_size: int, seed: int = 0) -> StatefulDataLoader:
    """The train tasks as verl's dataset rows (``raw_prompt``, ``index``, ``agent_name`` and
    the task column), batched with verl's ``collate_fn``."""
    rows = [{"raw_prompt": [{"role": "user", "content": task.instruction}], "index": i,
             "agent_name": agent_loop.AGENT_NAME, "data_source": "agentcredit/fake",
             agent_loop.TASK_COLUMN: {"split": "train", "task_id": task.task_id}}
            for i, task in enumerate(setup._suite.tasks("train")[:TASKS * 2])]
    return StatefulDataLoader(rows, batch_size=batch_size, shuffle=True, collate_fn=collate_fn,
                              generator=torch.Generator().manual_seed(seed))


def _trainer(config, workers, setup, tokenizer) -> AgentCreditTrainer:
    """The trainer as verl builds it (its own ``__init__``) with what ``_setup`` would attach:
    the tokenizer, worker groups, dataloader, rollout and reward managers."""
    trainer = AgentCreditTrainer(config)
    trainer.tokenizer = tokenizer
    trainer.actor_rollout_wg = trainer.ref_policy_wg = workers
    trainer.ref_in_actor = False
    trainer.train_dataloader = _dataloader(setup, config.data.train_batch_size)
    trainer.train_dataloader_it = None
    trainer.reward_loop_manager = SimpleNamespace(reward_loop_worker_handles=[])
    trainer.checkpoint_manager = SimpleNamespace(sleep_replicas=lambda: None)
    trainer.resource_pool_manager = SimpleNamespace(get_n_gpus=lambda: DATA_PARALLEL)
    trainer.curr_step_profile = False
    return trainer


class Rollouts:
    """verl's agent-loop manager, in process: one ``AgentLoopWorkerTQ`` (verl's own
    ``__init__`` and ``generate_sequences``) whose client is verl's ``LLMServerClient``."""

    def __init__(self, config, servers: FakeServers):
        worker_cls = AgentLoopWorkerTQ.__ray_metadata__.modified_class
        self.worker = worker_cls(config, LLMServerClient(config, load_balancer_handle=servers),
                                 None, [])

    def generate_sequences(self, batch):
        async def run():
            await self.worker.generate_sequences(batch)
            await asyncio.gather(*list(self.worker.background_tasks))

        asyncio.run(run())


@pytest.fixture(scope="module")
def skill_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("skills")
    (root / "fake").mkdir()
    for name, text in SKILLS.items():
        (root / "fake" / name).write_text(text)
    return root


@pytest.fixture(scope="module")
def composed(tiny_fake_run, fake_model_dir, skill_root):
    """``launch(method, run_dir)``: the launcher's verl config for the tiny corridor run.
    verl's Hydra config is composed once (for GRPO); another method's launch differs from it
    in the estimator and the agentcredit section only (test_launch.py composes every launch)."""
    def plan(method, run_dir):
        return launch.plan([
            "alfworld", method, "--config", "embedded", *tiny_fake_run,
            f"skills.root={skill_root}",
            f"rollout.group_size={GROUP_SIZE}", f"rollout.tasks_per_update={TASKS}",
            f"optim.mini_batches={MINI_BATCHES}", "--",
            f"actor_rollout_ref.model.path={fake_model_dir}",
            f"trainer.n_gpus_per_node={DATA_PARALLEL}", f"trainer.default_local_dir={run_dir}"])

    base = launch.compose(plan("grpo", "unused").verl)

    def config_for(method, run_dir):
        planned = plan(method, run_dir)
        config = copy.deepcopy(base)
        config.algorithm.adv_estimator = f"agentcredit.{planned.config.credit.estimator}"
        config.agentcredit.overrides = list(planned.agentcredit)
        config.trainer.default_local_dir = str(run_dir)
        launch.check(config)
        return config

    return config_for


@pytest.fixture(scope="module")
def tiny_policy(fake_model_dir):
    return load_policy(str(fake_model_dir))


@pytest.fixture(scope="module", params=METHODS)
def step(request, tiny_policy, composed, skill_root, tmp_path_factory) -> Step:
    model, tokenizer = tiny_policy
    config = composed(request.param, tmp_path_factory.mktemp("run"))
    setup = agent_loop.run_setup(*agent_loop.agentcredit_settings(config))
    queue = Queue()
    workers = FakeWorkers(model, queue)
    played = {}

    def recorded(trajectory, trace, trajectory_id, versions):
        played[trajectory_id] = (trajectory, trace)
        return step_outputs(trajectory, trace, trajectory_id, versions)

    step_outputs = agent_loop.step_outputs
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny forwards: on a busy machine thread hand-offs dominate
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name in ("kv_batch_get", "kv_batch_put", "async_kv_batch_put", "async_kv_put",
                         "kv_clear", "kv_list", "save_checkpoint", "load_checkpoint"):
                # TransferQueue 0.1.8 has no checkpoint calls, which verl's async modes make
                patch.setattr(transfer_queue, name, getattr(queue, name), raising=False)
            patch.setattr(transfer_queue, "init", lambda *args, **kwargs: None)
            patch.setattr(agent_loop, "step_outputs", recorded)
            trainer = _trainer(config, workers, setup, tokenizer)
            trainer.agent_loop_manager = Rollouts(config, FakeServers(tokenizer))
            # fit's first step
            trainer.global_steps = 1
            metrics, timing = {}, {"step": 1.0}
            batch = trainer.step(metrics, timing)
            trainer._compute_metrics(batch, metrics, timing, global_steps=1, epoch=0)
            trainer._save_checkpoint()
            resumed = _trainer(config, FakeWorkers(model, queue), setup, tokenizer)
            resumed._load_checkpoint()
            reissued = resumed._reissue_inflight_prompts()
    finally:
        torch.set_num_threads(threads)
    return Step(queue=queue, batch=batch, metrics=metrics, workers=workers, played=played,
                config=config, setup=setup, skill_root=skill_root, trainer=trainer,
                resumed=resumed, reissued=reissued)


def _flat_order(run: Step) -> tuple[list, list[str]]:
    """The rollouts the agent loop played in the hook's flat order (trajectory ids sorted,
    groups numbered by uid), and the queue key of each of their steps."""
    ids = sorted(run.played)
    groups = {uid: g for g, uid in enumerate(sorted({tid.split("_")[0] for tid in ids}))}
    trajectories = [dataclasses.replace(run.played[tid][0], group_id=groups[tid.split("_")[0]])
                    for tid in ids]
    return trajectories, [f"{tid}_{t}" for tid, trajectory in zip(ids, trajectories, strict=True)
                          for t in range(len(trajectory.steps))]


def _scored_by_verl(run: Step, keys: list[str], steps, field: str) -> torch.Tensor:
    """The response-aligned ``field`` verl's passes left on the rows, as ``[S, L]`` step rows."""
    out = torch.zeros(steps.loss_mask.shape)
    out[steps.loss_mask] = torch.cat([run.queue.rows[("train", key)][field] for key in keys])
    return out


def _embedded(run: Step, model, tokenizer, monkeypatch):
    """The embedded trainer's credit step (``CreditInputs.prepare``, the estimator,
    ``CreditResult.per_token``: what ``train/update.py`` runs) on the rollouts the agent loop
    played, fed the log-probs verl's passes scored (``ℓ^b``, ``ℓ_ref`` and ADRS's ``ℓ^T``):
    ``(advantages [S, L], steps, old, ref, keys)``.

    The scores are verl's, not the embedded scorer's, so both sides run the same credit on
    the same numbers: the embedded passes score padded, length-sorted micro-batches and verl's
    actor one unpadded sequence at a time, which differ by float32 rounding (about 1e-6,
    ``test_the_embedded_scoring_passes_agree_with_verls_to_float32_rounding``), and ADRS's
    whitening of ``r^T`` within a group divides that by the group's spread, so on some
    rollouts the advantages would differ by 1e-5."""
    trajectories, keys = _flat_order(run)
    config = run.setup.config
    steps = tensorize_steps(trajectories, tokenizer.pad_token_id)
    old = _scored_by_verl(run, keys, steps, "old_log_probs")
    ref = _scored_by_verl(run, keys, steps, "ref_log_prob")
    if "teacher" in config.inputs:
        teacher = _scored_by_verl(run, keys, steps, verl_rows.TEACHER)
        monkeypatch.setattr(credit_inputs, "teacher_logprobs", lambda *args, **kwargs: teacher)
    prepared = credit_inputs.CreditInputs(config, run.setup._suite, tokenizer,
                                          SkillProvider(run.skill_root)
                                          ).prepare(model, trajectories, steps, old, ref, 1)
    result = get_estimator(config.credit.estimator)(prepared.batch,
                                                    estimator_config(config.credit))
    return result.per_token(steps.loss_mask), steps, old, ref, keys


class CountingOptimizer:
    """An optimiser that only counts its steps (the embedded ``ppo_update``'s)."""

    def __init__(self, model):
        self.model, self.steps = model, 0

    def step(self):
        self.steps += 1

    def zero_grad(self, set_to_none=True):
        self.model.zero_grad(set_to_none=set_to_none)


def test_a_whole_step_writes_the_embedded_trainers_advantages(step, tiny_policy, monkeypatch):
    model, tokenizer = tiny_policy
    expected, steps, _, _, keys = _embedded(step, model, tokenizer, monkeypatch)
    assert expected[steps.loss_mask].abs().sum() > 0, "the rollouts carry no signal"
    got = torch.cat([step.queue.rows[("train", key)]["advantages"] for key in keys])
    # the same credit on the same scores: equal to the last bit
    torch.testing.assert_close(got, expected[steps.loss_mask], atol=0, rtol=0)
    padding = [k for k, tag in zip(step.batch.keys, step.batch.tags, strict=True)
               if tag.get("is_padding")]
    for key in padding:
        assert (step.queue.rows[("train", key)]["advantages"] == 0).all()


def test_the_embedded_scoring_passes_agree_with_verls_to_float32_rounding(step, tiny_policy):
    """``ℓ^b`` and ADRS's teacher ``ℓ^T`` of the embedded passes (``score_steps`` and
    ``CreditInputs``'s teacher pass) are verl's passes' to float32 rounding: the same model on
    the same tokens, batched differently (padded micro-batches against one unpadded sequence
    at a time), so sums run in another order; 1e-5 is some twenty float32 ulps of a log-prob
    of a few nats."""
    model, tokenizer = tiny_policy
    trajectories, keys = _flat_order(step)
    config = step.setup.config
    steps = tensorize_steps(trajectories, tokenizer.pad_token_id)
    old = score_steps(model, steps, config.optim.score_micro_batch_size)
    torch.testing.assert_close(old, _scored_by_verl(step, keys, steps, "old_log_probs"),
                               atol=1e-5, rtol=0)
    if "teacher" in config.inputs:
        prepared = credit_inputs.CreditInputs(config, step.setup._suite, tokenizer,
                                              SkillProvider(step.skill_root)
                                              ).prepare(model, trajectories, steps, old, old, 1)
        torch.testing.assert_close(prepared.teacher,
                                   _scored_by_verl(step, keys, steps, verl_rows.TEACHER),
                                   atol=1e-5, rtol=0)


def test_an_update_makes_the_embedded_trainers_optimiser_steps_over_as_many_rows(
        step, tiny_policy, monkeypatch):
    model, tokenizer = tiny_policy
    advantages, steps, old, ref, keys = _embedded(step, model, tokenizer, monkeypatch)
    optimizer = CountingOptimizer(model)
    optim = dataclasses.replace(step.setup.config.optim, mini_batches=MINI_BATCHES)
    ppo_update(model, optimizer, PPOBatch(steps, old, advantages, ref), optim, torch.Generator())
    model.zero_grad(set_to_none=True)
    rows = len(keys)
    # the update's rows split as evenly as possible, the larger shares first
    shares = [rows // MINI_BATCHES + (k < rows % MINI_BATCHES) for k in range(MINI_BATCHES)]
    real = [sum(not key.startswith("pad") for key in taken) for taken in step.workers.steps]
    assert len(step.workers.steps) == optimizer.steps == MINI_BATCHES
    assert real == shares
    assert sorted(key for taken in step.workers.steps for key in taken
                  if not key.startswith("pad")) == sorted(keys)


def test_a_whole_step_logs_verls_metrics_and_the_dropped_rollout(step):
    metrics = step.metrics
    assert metrics["training/off_policy/trajectory_spans/mean"] == 1
    assert metrics["training/off_policy/trajectory_staleness/mean"] == 0
    assert metrics["training/num_turns/mean"] > 0
    assert metrics["agentcredit/rollouts"] == TASKS * GROUP_SIZE - 1
    assert metrics["agentcredit/dropped_rollouts"] == 1
    assert any(key.startswith("credit/") for key in metrics)
    assert metrics["actor/grad_norm"] == 1.0


def test_a_checkpoint_saves_no_transferqueue_state_and_resumes_at_its_step(step):
    run_dir = Path(step.config.trainer.default_local_dir)
    assert step.queue.checkpoints == []  # the synchronous trainer keeps nothing in flight
    assert (run_dir / "latest_checkpointed_iteration.txt").read_text() == "1"
    assert step.workers.checkpoint == (str(run_dir / "global_step_1" / "actor"), 1)
    resumed = step.resumed
    assert resumed.global_steps == 1
    assert resumed.actor_rollout_wg.loaded == str(run_dir / "global_step_1" / "actor")
    assert step.reissued == 0
    # the dataloader resumes where the checkpointed one stood
    after_save = next(step.trainer.train_dataloader_it)["index"].tolist()
    assert next(iter(resumed.train_dataloader))["index"].tolist() == after_save
