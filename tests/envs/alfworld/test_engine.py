import json
from pathlib import Path

import pytest

from agentcredit.envs.alfworld.engine import NOTHING_HAPPENS, AlfWorldEnv, plan_game
from agentcredit.envs.alfworld.game_file import GameFileError, read_game_file
from agentcredit.envs.base import Environment, Task


def test_alfworld_env_speaks_the_environment_protocol(env):
    assert isinstance(env, Environment)


@pytest.mark.parametrize("action", ["", " ", "x" * 10_000, "prendre l'œuf ☕", "go to nowhere 99",
                                    None, 42])
def test_bad_actions_are_invalid_steps_that_leave_the_state_unchanged(env, train_games, action):
    env.reset(train_games[0])
    before, admissible = env.snapshot(), env.admissible_actions()
    obs, reward, done, info = env.step(action)
    assert obs.text == NOTHING_HAPPENS and not info.valid and reward == 0.0 and not done
    assert env.snapshot() == before and obs.admissible_actions == admissible


def test_an_action_from_another_game_is_invalid(env, games_by_type):
    other = games_by_type["pick_heat_then_place"][0]
    foreign = next(a for a in env.expert(other) if a.startswith("heat "))
    env.reset(games_by_type["look_at_obj_in_light"][0])
    assert env.step(foreign)[3].valid is False


def test_snapshot_holds_positive_facts_only(env, games_by_type):
    task = games_by_type["pick_heat_then_place"][0]
    env.reset(task)
    for action in env.expert(task):
        env.step(action)
        facts = env.snapshot()
        assert facts and all(v is True for v in facts.values())
        assert not any(f.startswith("not_") for f in facts)
    assert any(f.startswith("ishot(") for f in facts)


def test_steps_after_the_game_is_won_change_nothing(env, train_games):
    task = train_games[0]
    env.reset(task)
    for action in env.expert(task):
        env.step(action)
    _, reward, done, info = env.step("look")
    assert done and info.won and not info.valid and reward == 1.0


def test_step_before_reset_says_what_to_do():
    with pytest.raises(RuntimeError, match="reset"):
        AlfWorldEnv().step("look")


def _task(path):
    return Task("broken", "alfworld", "train", "do it", "pick_and_place",
                payload={"game_file": str(path)})


def test_missing_or_corrupt_game_files_raise_errors_naming_the_file(tmp_path):
    env = AlfWorldEnv()
    missing = tmp_path / "gone" / "game.tw-pddl"
    with pytest.raises(GameFileError, match=str(missing)):
        env.reset(_task(missing))
    corrupt = tmp_path / "corrupt.tw-pddl"
    corrupt.write_text("{not json")
    with pytest.raises(GameFileError, match=str(corrupt)):
        env.reset(_task(corrupt))
    partial = tmp_path / "partial.tw-pddl"
    partial.write_text(json.dumps({"pddl_domain": "(define)"}))
    with pytest.raises(GameFileError, match="partial.tw-pddl lacks"):
        env.reset(_task(partial))


def test_a_game_whose_pddl_is_broken_raises_an_error_naming_it(tmp_path, train_games):
    game = json.loads(Path(train_games[0].payload["game_file"]).read_text())
    game["pddl_problem"] = game["pddl_problem"].replace("(:init", "(:init (nonsense", 1)
    bad = tmp_path / "bad.tw-pddl"
    bad.write_text(json.dumps(game))
    with pytest.raises(GameFileError, match="bad.tw-pddl"):
        AlfWorldEnv().reset(_task(bad))


def _planner_copies() -> set[str]:
    """Paths of the copies of Fast Downward's library mapped into this process."""
    maps = Path("/proc/self/maps").read_text().splitlines()
    return {line.split(maxsplit=5)[5] for line in maps if "libdownward.so" in line}


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux /proc")
def test_planner_copies_are_reused_not_made_per_game(train_games):
    before = _planner_copies()
    for task in train_games[:5]:
        plan_game(read_game_file(task.payload["game_file"]))
    assert len(_planner_copies() - before) <= 1
    env = AlfWorldEnv()
    for task in train_games[:6]:
        env.reset(task)
        env.step(env.admissible_actions()[0])
        env.expert(task)
    assert len(_planner_copies() - before) <= 2
    env.close()
    other = AlfWorldEnv()
    for task in train_games[6:9]:
        other.reset(task)
    assert len(_planner_copies() - before) <= 2
    other.close()


def test_switching_games_and_back_replays_each_game_from_its_start(train_games):
    env, first, second = AlfWorldEnv(), train_games[0], train_games[1]
    opening = env.reset(first)
    env.step(env.admissible_actions()[0])
    env.reset(second)
    assert env.reset(first) == opening
    assert env.step(env.expert(first)[0])[3].valid
