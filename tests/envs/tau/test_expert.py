"""The expert reaches reward 1 on every task of both domains (NL assertions skipped), and the
suites serve tau2's splits."""

from __future__ import annotations

from agentcredit.config import load_config
from agentcredit.envs.tau.engine import TauEnv
from agentcredit.envs.tau.tasks import build_tasks

SIZES = {"retail": (114, 74, 40), "airline": (50, 30, 20)}


def test_the_expert_wins_every_task_of_the_domain(domain):
    env = TauEnv(domain.name)
    tasks = build_tasks(domain.name, "base")
    assert len(tasks) == SIZES[domain.name][0]
    for task in tasks:
        env.reset(task)
        for action in env.expert(task):
            _, reward, done, info = env.step(action)
            assert info.valid, (task.task_id, action)
            if done:
                break
        assert done and reward == 1.0 and info.won, (task.task_id, env.last_reward)


def test_the_suites_serve_tau2s_train_and_test_splits(domain):
    config = load_config(None, [f"env=tau-{domain.name}", "env.tau.max_tasks=0"])
    suite = config.env.build_suite()
    _, train, test = SIZES[domain.name]
    assert (len(suite.tasks("train")), len(suite.tasks("test"))) == (train, test)
    assert suite.validation_splits == ("test",)
    task = suite.tasks("test")[0]
    assert task.env == f"tau-{domain.name}" and "<policy>" in task.instruction
    assert suite.make_env().name == f"tau-{domain.name}"
