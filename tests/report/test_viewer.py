"""The viewer's data: each group says how many of its rollouts won and whether it carries a
signal, and a run opens on its first group with signal."""

from __future__ import annotations

from agentcredit.report.viewer import DEFINITIONS, NO_TRUTH, opening, shape_update


def _rollout(group: int, won: bool, advantage: float) -> dict:
    step = {"observation": "o", "response": "go", "action": "go", "valid": True,
            "reward": float(won), "advantage": advantage, "values": {}, "ledger": []}
    return {"rollout": 0, "group_id": group, "task_id": f"t{group}", "task_type": "pick",
            "won": won, "outcome_reward": float(won), "truncated": False,
            "final_observation": "", "steps": [step], "trace": None}


def _update(number: int, groups: list[list[tuple[bool, float]]]) -> dict:
    rollouts = [_rollout(g, won, adv) for g, members in enumerate(groups)
                for won, adv in members]
    return shape_update({"update": number, "estimator": "grpo", "step_fields": [],
                         "token_fields": [], "rollouts": rollouts})


def test_each_group_counts_its_wins_and_says_whether_it_has_signal():
    update = _update(1, [[(False, 0.0), (False, 0.0)], [(True, 0.7), (False, -0.7)],
                         [(True, 0.0), (True, 0.0)]])
    assert [(g["won"], len(g["rollouts"]), g["signal"]) for g in update["groups"]] == [
        (0, 2, False), (1, 2, True), (2, 2, False)]
    assert not update["token_level"]


def test_a_run_opens_on_the_newest_update_with_signal_at_its_first_group_with_signal():
    silent = [[(False, 0.0), (False, 0.0)]]
    mixed = [[(False, 0.0)], [(False, 0.0)], [(True, 0.5), (False, -0.5)]]
    assert opening([_update(1, mixed), _update(2, silent)]) == [0, 2]
    assert opening([_update(1, mixed), _update(2, mixed)]) == [1, 2]
    assert opening([_update(1, silent), _update(2, silent)]) == [1, 0]  # none: the newest


def test_every_advantage_a_vict_or_adrs_step_shows_is_defined():
    assert {"advantage", "base_advantage", "vict_advantage", "correction", "step_advantage",
            "token_advantage"} <= set(DEFINITIONS)
    assert "base + correction" in DEFINITIONS["correction"]


def test_an_update_saved_with_its_truth_says_so_and_one_without_says_how_to_get_it():
    plain = _update(2, [[(True, 0.5), (False, -0.5)]])
    assert plain["truth"] is None  # saved without the truth key: not checked
    rollouts = [_rollout(0, True, 0.5)]
    rollouts[0]["steps"][0]["truth"] = -1.0
    saved = shape_update({"update": 4, "estimator": "grpo", "step_fields": [],
                          "token_fields": [], "truth": "solver", "rollouts": rollouts})
    assert saved["truth"] == "solver"
    assert saved["groups"][0]["rollouts"][0]["steps"][0]["truth"] == -1.0
    assert "run.credit_check_every=K" in NO_TRUTH and "run.save_rollouts" in NO_TRUTH
    assert "d(s_t) − d(s_{t+1}) − 1" in DEFINITIONS["truth"]
