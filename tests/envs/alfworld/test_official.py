import json
import shutil
from pathlib import Path

import pytest

from agentcredit.envs.alfworld.game_file import GameFileError
from agentcredit.envs.alfworld.official import load_official_games


def test_official_folder_layout_loads_with_task_type_and_instruction(tmp_path, games_by_type, env):
    source = games_by_type["pick_heat_then_place"][0]
    trial = (tmp_path / "valid_seen" / "pick_heat_then_place_in_recep-Egg-None-CounterTop-1"
             / "trial_1")
    trial.mkdir(parents=True)
    shutil.copy(source.payload["game_file"], trial / "game.tw-pddl")
    unsolvable = tmp_path / "valid_seen" / "pick_and_place_simple-Mug-None-Desk-2" / "trial_2"
    unsolvable.mkdir(parents=True)
    game = json.loads(Path(source.payload["game_file"]).read_text())
    (unsolvable / "game.tw-pddl").write_text(json.dumps({**game, "solvable": False}))

    tasks = load_official_games(tmp_path / "valid_seen", "valid_seen")
    assert len(tasks) == 1
    task = tasks[0]
    assert task.task_type == "pick_heat_then_place"
    assert task.instruction == source.instruction
    assert "Your task is to: " + task.instruction in env.reset(task).text


def test_official_loader_errors_name_the_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_official_games(tmp_path / "nowhere", "valid_seen")
    with pytest.raises(FileNotFoundError, match="no solvable"):
        load_official_games(tmp_path, "valid_seen")
    odd = tmp_path / "mystery" / "game.tw-pddl"
    odd.parent.mkdir()
    odd.write_text(json.dumps({"pddl_domain": "", "grammar": "Your task is to: x.\"",
                               "pddl_problem": ""}))
    with pytest.raises(GameFileError, match="task type"):
        load_official_games(tmp_path, "valid_seen")
