"""``evaluate`` logs each game's outcome per split (``eval/{split}/won``) in strict JSON, and
shows an ``eval`` start and end line when progress is on."""

from __future__ import annotations

import json
from types import SimpleNamespace

import torch

from agentcredit.progress import reporting
from agentcredit.train.evaluation.evaluate import evaluate


class _Collector:
    """Plays nothing: game ``k`` of the call is won when ``won[k]``; every game ends in one
    step, reported to ``on_step`` like the real collector does."""

    def __init__(self, won: list[bool]):
        self.won = won

    def collect(self, tasks, group_size, on_step=None, **_):
        """``group_size`` episodes of each task, task-major as the real collector returns them;
        ``won`` lists every episode's outcome."""
        if on_step is not None:
            on_step(len(tasks) * group_size)
        episodes = [task for task in tasks for _ in range(group_size)]
        return [SimpleNamespace(task=task, won=won, num_invalid=0, steps=[None], env_metrics={})
                for task, won in zip(episodes, self.won, strict=True)]


def test_each_games_outcome_is_logged_in_split_order_as_a_strict_json_string(make_fake_task):
    splits = {"valid_seen": [make_fake_task("valid_seen", i) for i in range(3)],
              "valid_unseen": [make_fake_task("valid_unseen", i) for i in range(2)]}
    metrics = evaluate(_Collector([True, False, True, False, True]), splits, temperature=0.4,
                       generator=torch.Generator())
    assert metrics["eval/valid_seen/won"] == "101" and metrics["eval/valid_unseen/won"] == "01"
    for split in splits:  # the outcomes and the success rate agree
        won = metrics[f"eval/{split}/won"]
        assert metrics[f"eval/{split}/success"] == won.count("1") / len(won)
    assert json.loads(json.dumps(metrics, allow_nan=False)) == metrics


def test_an_evaluation_shows_its_finished_game_count_when_it_starts_and_ends(make_fake_task,
                                                                             capsys):
    tasks = {"valid": [make_fake_task("valid", i) for i in range(4)]}
    with reporting(True):
        evaluate(_Collector([False] * 4), tasks, temperature=0.4, generator=torch.Generator())
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("eval: 0/4 games (0%)")
    assert lines[-1].startswith("eval: 4/4 games in ")


def test_several_episodes_per_game_log_each_games_wins_and_the_mean_over_episodes(
        make_fake_task):
    """Three episodes per game: game 0 wins 2 of its 3, game 1 none, game 2 all 3, game 3 one;
    success is 6 wins in 12 episodes, per split 2/6 and 4/6."""
    splits = {"valid_seen": [make_fake_task("valid_seen", i) for i in range(2)],
              "valid_unseen": [make_fake_task("valid_unseen", i) for i in range(2)]}
    outcomes = [True, False, True, False, False, False, True, True, True, False, False, True]
    metrics = evaluate(_Collector(outcomes), splits, temperature=0.4,
                       generator=torch.Generator(), episodes_per_game=3)
    assert metrics["eval/valid_seen/won"] == "20" and metrics["eval/valid_unseen/won"] == "31"
    assert metrics["eval/success"] == 0.5
    assert metrics["eval/valid_seen/success"] == 2 / 6
    assert metrics["eval/valid_unseen/success"] == 4 / 6
    assert metrics["eval/episodes_per_game"] == 3.0
