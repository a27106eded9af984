"""A run with an RL pool: its rollouts come only from the pool, and every evaluation logs the
pool's per-game outcomes (several episodes each), with the held-out splits beside."""

from __future__ import annotations

import json

import pytest

from agentcredit.config import load_config
from agentcredit.rollout.collector import RolloutCollector
from agentcredit.train.build import draw_pool
from agentcredit.train.loop import train

POOL_RUN = (
    "run.updates=3", "run.eval_every=1", "run.checkpoint_every=3", "sft.epochs=10",
    "sft.batch_size=4", "sft.lr=0.01", "rollout.group_size=2", "rollout.tasks_per_update=2",
    "optim.micro_batch_size=4",
    # 3 train games per type, 1 of each in the pool; 3 episodes per pool game
    "env.train_games_per_type=3", "env.pool_games_per_type=1", "eval.pool_episodes_per_game=3",
)


@pytest.fixture(scope="module")
def pool_run(tmp_path_factory, tiny_fake_run):
    """A 3-update run on a pool of 2 of the 6 fake train tasks, with every task list the
    collector was given and its temperature (training rollouts 1.0, evaluation 0.4)."""
    calls = []
    collect = RolloutCollector.collect

    def recording(self, tasks, group_size, *args, temperature, **kwargs):
        calls.append(([t.task_id for t in tasks], group_size, temperature))
        return collect(self, tasks, group_size, *args, temperature=temperature, **kwargs)

    config = load_config(None, [*tiny_fake_run, *POOL_RUN, "eval.held_out=ends",
                                f"run.output_dir={tmp_path_factory.mktemp('pool')}",
                                "run.name=pool", "run.seed=1"])
    echoed: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RolloutCollector, "collect", recording)
        train(config, echo=echoed.append)
    records = [json.loads(line) for line in (config.run_dir / "metrics.jsonl").read_text()
               .splitlines()]
    return config, calls, records, echoed


def _pool_ids(config, make_fake_task):
    """The pool the run's seed draws from the fake suite's 6 train tasks."""
    train_tasks = [make_fake_task("train", i) for i in range(6)]
    return [t.task_id for t in draw_pool(train_tasks, 1, config.run.seed)]


def test_rl_rollouts_come_only_from_the_pool(pool_run, make_fake_task):
    config, calls, _, _ = pool_run
    pool = _pool_ids(config, make_fake_task)
    assert len(pool) == 2
    trained = [ids for ids, _, temperature in calls if temperature == 1.0]
    assert len(trained) == 3  # one collection per update
    assert {task for ids in trained for task in ids} <= set(pool)


def test_the_pool_is_evaluated_with_its_episodes_per_game_and_the_held_out_at_the_ends(
        pool_run, make_fake_task):
    config, calls, records, echoed = pool_run
    pool = _pool_ids(config, make_fake_task)
    evaluated = [(ids, episodes) for ids, episodes, temperature in calls if temperature == 0.4]
    assert (pool, 3) in evaluated
    evals = [r for r in records if r["kind"] == "eval"]
    assert [r["update"] for r in evals] == [0, 1, 2, 3]
    for record in evals:
        won = record["eval/pool/won"]
        assert len(won) == 2 and set(won) <= set("0123")
        assert record["eval/pool/episodes_per_game"] == 3.0
        assert record["eval/pool/success"] == pytest.approx(sum(map(int, won)) / 6)
    for record in evals:  # held-out: only at the first and last evaluation, one episode a game
        ends = record["update"] in (0, 3)
        assert ("eval/valid_seen/won" in record) == ends
        if ends:
            assert record["eval/valid_unseen/episodes_per_game"] == 1.0
            assert len(record["eval/valid_seen/won"]) == 2
            assert "eval/episodes_per_game" not in record  # the splits' counts differ
    # the progress lines name the pool and the held-out games apart, never a merged figure
    shown = [line for line in echoed if line.startswith("eval after update")]
    assert shown[0].startswith("eval after update 0: pool ")
    assert "(games RL trains on); held-out valid_seen " in shown[0]
    assert "held-out" not in shown[1]
