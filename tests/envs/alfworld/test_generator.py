import json
import multiprocessing
from pathlib import Path

import pytest

from agentcredit.envs.alfworld import generator, scenes
from agentcredit.envs.alfworld.engine import AlfWorldEnv
from agentcredit.envs.alfworld.game_file import read_game_file
from agentcredit.envs.alfworld.generator import generate_game, generate_split
from agentcredit.envs.alfworld.options import AlfWorldConfig, GeneratorConfig
from agentcredit.envs.alfworld.tasks import TASK_TYPES
from agentcredit.envs.suites import GamesPerType, build_env_suite

from .conftest import SMALL


def test_every_task_type_generates_a_game_the_planner_solves(games_by_type, env):
    for task_type, games in games_by_type.items():
        assert len(games) == 2, task_type
        for task in games:
            game = read_game_file(task.payload["game_file"])
            assert game["solvable"] and game["walkthrough"]
            obs = env.reset(task)
            assert "Your task is to: " + task.instruction in obs.text
            for action in game["walkthrough"]:
                obs, reward, done, info = env.step(action)
                assert info.valid, (task.task_id, action)
            assert done and info.won and reward == 1.0, task.task_id


def test_no_generated_game_is_won_at_the_start(train_games, env):
    for task in train_games:
        env.reset(task)
        assert env.step("look")[3].won is False


def test_generation_is_deterministic_by_seed(tmp_path, train_games):
    first = train_games[0]
    again = generate_game("train", first.task_type, 0, SMALL, tmp_path / "again")
    assert (read_game_file(again.payload["game_file"])
            == read_game_file(first.payload["game_file"]))
    other = generate_game("train", first.task_type, 0, GeneratorConfig(seed=8, max_receptacles=12),
                          tmp_path / "other")
    assert (read_game_file(other.payload["game_file"])["pddl_problem"]
            != read_game_file(first.payload["game_file"])["pddl_problem"])


def _initial_state(task):
    problem = read_game_file(task.payload["game_file"])["pddl_problem"]
    return problem.split("(:init", 1)[1].split("(:goal", 1)[0]


def test_splits_are_disjoint(tmp_path, train_games):
    seen = [generate_game("valid_seen", t, 0, SMALL, tmp_path) for t in TASK_TYPES]
    unseen = [generate_game("valid_unseen", t, 0, SMALL, tmp_path) for t in TASK_TYPES]
    train_states = {_initial_state(t) for t in train_games}
    assert not train_states & {_initial_state(t) for t in seen}
    assert {t.payload["scene"] for t in seen} <= set(scenes.TRAIN_SCENES)
    assert {t.payload["scene"] for t in unseen} <= set(scenes.HELD_OUT_SCENES)
    assert not set(scenes.TRAIN_SCENES) & set(scenes.HELD_OUT_SCENES)
    assert len({t.task_id for t in train_games + seen + unseen}) == len(train_games) + 12


def test_room_size_knob_caps_receptacles(train_games):
    assert all(t.payload["receptacles"] <= 12 for t in train_games)


def test_tasks_are_reloaded_from_the_cache_without_regenerating(game_cache, train_games):
    task = train_games[0]
    meta = json.loads((Path(task.payload["game_file"]).parent / "meta.json").read_text())
    index = int(task.task_id.rsplit("-", 1)[1])
    assert generate_game("train", task.task_type, index, SMALL, game_cache) == task
    assert meta["plan_length"] == len(AlfWorldEnv().expert(task))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="unknown split 'test'"):
        generate_game("test", "pick_and_place", 0, SMALL, "/tmp/unused")
    with pytest.raises(ValueError, match="unknown ALFWorld task type 'pick'"):
        generate_game("train", "pick", 0, SMALL, "/tmp/unused")
    with pytest.raises(ValueError,
                       match=r"max_receptacles = 2 is out of range; allowed \[4, 1000\]"):
        GeneratorConfig(max_receptacles=2)


def test_layouts_omit_receptacles_that_scenes_add():
    # FloorPlan1's layout has no stove burner or coffee machine pose; its object list does.
    kitchen = scenes.load_scene(1)
    types = {r.rtype for r in kitchen.receptacles}
    assert {"StoveBurner", "CoffeeMachine", "SinkBasin", "Microwave", "Fridge"} <= types
    assert len({r.rid for r in kitchen.receptacles}) == len(kitchen.receptacles)


def test_basins_keep_their_layout_pose_and_alfworld_names(env, tmp_path):
    kitchen = scenes.load_scene(1)
    [sink] = [r for r in kitchen.receptacles if r.rtype == "SinkBasin"]
    assert sink.rid.startswith("Sink|") and not sink.rid.startswith("SinkBasin|")
    bathroom = scenes.load_scene(401)
    assert any(r.rtype == "BathtubBasin" for r in bathroom.receptacles)
    config = GeneratorConfig(seed=3, max_receptacles=12)
    for index in range(3):
        task = generate_game("train", "pick_clean_then_place", index, config, tmp_path)
        text = env.reset(task).text
        assert "sinkbasin 1" in text and "basinbasin" not in text


def test_parallel_generation_writes_the_games_one_process_writes(tmp_path):
    types = ("pick_and_place", "pick_cool_then_place")
    serial = generate_split("valid_seen", 2, SMALL, tmp_path / "serial", types, workers=1)
    parallel = generate_split("valid_seen", 2, SMALL, tmp_path / "parallel", types, workers=2)
    assert [t.task_id for t in parallel] == [t.task_id for t in serial]
    for a, b in zip(serial, parallel, strict=True):
        assert read_game_file(a.payload["game_file"]) == read_game_file(b.payload["game_file"])


def test_a_pool_worker_generates_its_games_itself(tmp_path):
    """A ``multiprocessing.Pool`` worker is a daemon and may start no process (the learning
    benchmark generates its games in one): it generates the missing games itself."""
    types = ("pick_and_place",)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        tasks = pool.apply(generate_split, ("valid_seen", 2, SMALL, tmp_path / "pool", types))
    alone = generate_split("valid_seen", 2, SMALL, tmp_path / "alone", types, workers=1)
    assert [t.task_id for t in tasks] == [t.task_id for t in alone]


def test_two_runs_generating_one_game_at_once_both_succeed(tmp_path, monkeypatch):
    """A second writer finishes the same game between the first one's write and its rename
    (two runs sharing the cache): both succeed and the file is the game."""
    rename = generator.os.replace
    raced = []

    def rename_after_a_rival(src, dst):
        if not raced:
            raced.append(dst)
            generator.generate_game("train", "pick_and_place", 0, SMALL, tmp_path)
        rename(src, dst)

    monkeypatch.setattr(generator.os, "replace", rename_after_a_rival)
    task = generate_game("train", "pick_and_place", 0, SMALL, tmp_path)
    assert raced
    monkeypatch.setattr(generator.os, "replace", rename)
    alone = generate_game("train", "pick_and_place", 0, SMALL, tmp_path / "alone")
    assert read_game_file(task.payload["game_file"]) == read_game_file(alone.payload["game_file"])
    assert not list(Path(task.payload["game_file"]).parent.glob("*.tmp"))


def test_a_suite_says_how_many_games_it_read_back_and_from_where(game_cache, train_games):
    assert generator.missing_games("train", 2, SMALL, game_cache) == []
    assert len(generator.missing_games("train", 3, SMALL, game_cache)) == len(TASK_TYPES)
    options = AlfWorldConfig(generator=SMALL, cache_dir=str(game_cache))
    suite = build_env_suite("alfworld", options, GamesPerType(train=2, valid=1))
    assert suite.cache_note() is None  # nothing read yet
    assert suite.tasks("train") == train_games
    folder = generator.cache_folder(SMALL, game_cache)
    assert suite.cache_note().startswith(f"games: read {len(train_games)} generated games "
                                         f"from {folder} ")
    assert suite.tasks("train") == train_games  # the pool reads the train games again
    assert suite.cache_note().startswith(f"games: read {len(train_games)} generated games ")
    fresh = build_env_suite("alfworld", AlfWorldConfig(generator=SMALL, cache_dir=str(
        game_cache / "empty")), GamesPerType(train=1, valid=1))
    fresh.tasks("train")
    fresh.tasks("train")
    assert fresh.cache_note() is None  # this suite generated them: nothing was read back
    assert (folder / "train").is_dir()
