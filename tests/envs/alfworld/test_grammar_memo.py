import random
import sys

import pytest

from agentcredit.envs.alfworld import grammar_memo
from agentcredit.envs.alfworld.engine import AlfWorldEnv


def _walk(task, memo: bool, seed: int, steps: int):
    env = AlfWorldEnv(memoize=memo)
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
    for seed, (task_type, games) in enumerate(games_by_type.items()):
        task = games[seed % len(games)]  # one game of each type (the stock engine is slow)
        stock = _walk(task, memo=False, seed=seed, steps=25)
        memo = _walk(task, memo=True, seed=seed, steps=25)
        assert memo == stock, task_type


def test_memo_switches_on_and_off():
    grammar_memo.disable()
    assert not grammar_memo.enabled()
    grammar_memo.enable()
    assert grammar_memo.enabled()


def test_disable_restores_every_stock_reference():
    from textworld.envs.pddl import logic as pddl_logic
    from textworld.envs.pddl import textgen

    grammar_memo.disable()
    assert textgen.copy_context is grammar_memo._STOCK["copy_context"]
    assert pddl_logic.fast_downward is grammar_memo._STOCK["fast_downward"]
    grammar_memo.enable()
    assert textgen.copy_context is not grammar_memo._STOCK["copy_context"]
    assert pddl_logic.fast_downward is not grammar_memo._STOCK["fast_downward"]


def test_a_reset_on_a_cached_translation_starts_the_game_afresh(games_by_type):
    # the translation is shared between resets (and engines); each reset must still load it
    # into its own planner state, so the steps of one episode do not leak into the next
    task = games_by_type["pick_and_place"][0]
    env = AlfWorldEnv()
    first = env.reset(task)
    start = env.snapshot()
    translations = grammar_memo._MemoDownward.pddl2sas.cache_info()
    for action in env.expert(task)[:-1]:
        env.step(action)
    assert env.snapshot() != start
    again = env.reset(task)
    assert (again, env.snapshot()) == (first, start)
    other = AlfWorldEnv()
    assert (other.reset(task), other.snapshot()) == (first, start)
    after = grammar_memo._MemoDownward.pddl2sas.cache_info()
    assert after.hits >= translations.hits + 4 and after.misses == translations.misses
    other.close()
    env.close()


def test_a_translation_leaves_the_callers_command_line_alone(games_by_type, monkeypatch):
    # the stock translator sets sys.argv to its own command line on every call
    monkeypatch.setattr("sys.argv", ["agentcredit", "train", "run.name=x"])
    grammar_memo._MemoDownward.pddl2sas.cache_clear()
    env = AlfWorldEnv()
    env.reset(games_by_type["pick_and_place"][0])
    env.close()
    assert sys.argv == ["agentcredit", "train", "run.name=x"]
