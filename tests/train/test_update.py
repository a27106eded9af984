"""One update (train/update.py): it changes the learner and writes nothing, the loop writes
what it left (train/loop.py, ``write_update``); and GRPO end to end, from hand-built
trajectories to the loss's gradient on a two-parameter policy, against a hand-worked value."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import torch

from agentcredit.config import load_config
from agentcredit.credit import get_estimator
from agentcredit.credit.grpo import GRPOConfig
from agentcredit.envs.base import Task
from agentcredit.jsonl_log import read_jsonl
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.run.directory import RunDirectory
from agentcredit.train import update as update_module
from agentcredit.train.loop import write_update
from agentcredit.train.loss import ppo_loss
from agentcredit.train.run_state import setup
from agentcredit.train.step_tensors import credit_batch
from agentcredit.train.update import update_step

#: a VICT run whose second update has ledger rows (corrections; 9 with these seeds), saving
#: the rollouts of every update
UPDATE_RUN = ("credit.estimator=vict", "run.updates=2", "run.save_rollouts=1",
              "run.eval_at_start=false", "sft.epochs=40", "sft.batch_size=4", "sft.lr=0.01",
              "rollout.group_size=4", "rollout.tasks_per_update=4")


def _files(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def test_an_update_changes_only_the_learner_and_the_loop_writes_what_it_left(tmp_path,
                                                                               tiny_fake_run):
    config = load_config(None, [*tiny_fake_run, *UPDATE_RUN, f"run.output_dir={tmp_path}",
                                "run.name=update"])
    run = RunDirectory(config.run_dir)
    state = setup(config, run, resume=False, overwrite=False, echo=lambda _: None)
    try:
        learner = state.learner
        for update in (1, 2):
            before = _files(run.path)
            weights = {k: v.clone() for k, v in learner.model.state_dict().items()}
            metrics, made = update_step(learner, state.context, update)
            # it computed: the policy stepped, and not one byte of the run directory changed
            assert learner.stepped == update
            assert any(not torch.equal(weights[k], v)
                       for k, v in learner.model.state_dict().items())
            assert _files(run.path) == before
            assert metrics["kind"] == "update" and "time/save_rollouts" not in metrics
            # the loop writes: this update's ledger rows, tagged with it, and its rollouts
            written = write_update(state, update, made)
            assert set(written) == {"time/save_rollouts"}
            assert (run.rollouts / f"update_{update:05d}.json.gz").is_file()
        assert made.credit.ledger_rows, "no VICT correction: the ledger check would be empty"
        state.logs.ledger.close()
        assert [r for r in read_jsonl(run.ledger) if r["update"] == 2] == [
            {**row, "update": 2} for row in made.credit.ledger_rows]
    finally:
        state.logs.close()


def _one_step(group_id: int, reward: float, action_id: int) -> Trajectory:
    task = Task(f"t{group_id}", "fake", "train", "take the apple", "type0")
    step = Step("room", f"a{action_id}", f"a{action_id}", True, reward, "room", {}, [1],
                [action_id], [-0.69])
    return Trajectory(task=task, group_id=group_id, steps=[step])


def test_the_grpo_gradient_of_two_hand_built_groups_is_the_hand_worked_one():
    # policy π = softmax(θ) over two one-token actions, θ = (0, 0): π = (½, ½).
    # group 0: the winner (R = 1) took action 0, the loser (R = 0) action 1;
    # group 1: both lost, taking actions 0 and 1 (no signal, A = 0, tokens still in |V|).
    trajectories = [_one_step(0, 1.0, 0), _one_step(0, 0.0, 1),
                    _one_step(1, 0.0, 0), _one_step(1, 0.0, 1)]
    actions = torch.tensor([0, 1, 0, 1])
    options = GRPOConfig()
    credit = get_estimator("grpo")(credit_batch(trajectories), options)
    mask = torch.ones(4, 1, dtype=torch.bool)  # [S, L]: one response token per step
    advantages = credit.per_token(mask)
    theta = torch.zeros(2, requires_grad=True)
    logprobs = torch.log_softmax(theta, dim=0)[actions][:, None]  # [S, 1]
    loss, _ = ppo_loss(logprobs, logprobs.detach(), None, advantages, mask, kl_coef=0.0)
    loss.backward()
    # by hand: group 0's returns {1, 0}: μ = ½, population σ = ½, so A = ±a, a = ½ / (½ + ε);
    # at θ = old the ratio is 1 and nothing clips, so ∇L = −(1/|V|) Σ_t A_t ∇log π(a_t) with
    # ∇log π(k) = e_k − π and |V| = 4: −(a/4)·[(½, −½) − (−½, ½)] = (−a/4, a/4)
    a = 0.5 / (0.5 + options.eps)
    torch.testing.assert_close(theta.grad, torch.tensor([-a / 4, a / 4]), atol=1e-7, rtol=0)


def test_an_update_samples_its_tokens_three_calls_below_update_step(tmp_path, tiny_fake_run,
                                                                    monkeypatch):
    """update_step → collect_with_signal → RolloutCollector.collect → HFPolicy.generate, which
    draws each token with sample_token (agentcredit's own frames; torch's wrappers aside)."""
    from agentcredit.rollout import policy

    config = load_config(None, [*tiny_fake_run, "run.eval_at_start=false", "sft.epochs=1",
                                f"run.output_dir={tmp_path}", "run.name=depth"])
    state = setup(config, RunDirectory(config.run_dir), resume=False, overwrite=False,
                  echo=lambda _: None)
    chains, sample = [], policy.sample_token

    def recorded(*args, **kwargs):
        names = [f.function for f in inspect.stack() if "/agentcredit/" in f.filename]
        chains.append(names[:names.index("update_step") + 1][::-1])
        return sample(*args, **kwargs)

    monkeypatch.setattr(policy, "sample_token", recorded)
    try:
        update_step(state.learner, state.context, 1)
    finally:
        state.logs.close()
    # the frames of agentcredit's modules from update_step to sample_token's caller
    assert chains[0] == ["update_step", "collect_with_signal", "collect", "generate"]


def _runs(stages: list[str]) -> list[str]:
    """``stages`` with each run of one stage written once."""
    return [stage for i, stage in enumerate(stages) if i == 0 or stages[i - 1] != stage]


def test_the_module_lists_its_stages_in_the_order_update_step_runs_them():
    """The docstring's ``path   STAGE: …`` lines against ``update_step``'s capitalised
    section comments (``# SCORE: …``); every module it names exists."""
    listed = re.findall(r"^ {4}(\S+\.py) +([A-Z]+):", update_module.__doc__, re.MULTILINE)
    ran = re.findall(r"^ +# ([A-Z]+)\b", inspect.getsource(update_step), re.MULTILINE)
    assert ran == ["COLLECT", "SCORE", "CREDIT", "PPO", "METRICS"]
    assert _runs([stage for _, stage in listed]) == ran
    src = Path(update_module.__file__).parents[1]
    assert [path for path, _ in listed if not (src / path).is_file()] == []
