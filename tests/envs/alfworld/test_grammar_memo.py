import random

import pytest

from agentcredit.envs.alfworld import grammar_memo
from agentcredit.envs.alfworld.engine import AlfWorldEnv


def _walk(task, memo: bool, seed: int, steps: int):
    env = AlfWorldEnv(memoize_grammar=memo)
    rng = random.Random(seed)
    obs = env.reset(task)
    trace = [(obs.text, obs.admissible_actions, env.snapshot())]
    for _ in range(steps):
        obs, _, done, _ = env.step(rng.choice(obs.admissible_actions))
        trace.append((obs.text, obs.admissible_actions, env.snapshot()))
        if done:
            break
    return trace


@pytest.fixture(autouse=True)
def _memo_on_afterwards():
    yield
    grammar_memo.enable()


def test_memoised_engine_equals_the_stock_engine_on_random_walks_of_every_task_type(
        games_by_type):
    for task_type, games in games_by_type.items():
        for seed, task in enumerate(games):
            stock = _walk(task, memo=False, seed=seed, steps=25)
            memo = _walk(task, memo=True, seed=seed, steps=25)
            assert memo == stock, task_type


def test_memo_switches_on_and_off():
    grammar_memo.disable()
    assert not grammar_memo.enabled()
    grammar_memo.enable()
    assert grammar_memo.enabled()
