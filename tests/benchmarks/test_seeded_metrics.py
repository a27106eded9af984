"""The seeded-metrics comparison: every differing or one-sided key named, wall-clock keys not
compared."""

from __future__ import annotations

from seeded_metrics import CASES, compare


def test_each_case_key_that_differs_or_is_logged_on_one_side_is_named_once():
    before = {case: [{"kind": "update", "update": 1, "ppo/kl": 0.5, "time/update": 3.0}]
              for case in CASES}
    after = {case: [dict(records[0]) for records in [before[case]]] for case in CASES}
    after["grpo"][0]["ppo/kl"] = 0.5 + 2e-6  # past the tolerance
    after["adrs"][0]["ppo/kl"] = 0.5 + 5e-7  # within it
    after["dapo"][0]["score/trees"] = 1.0  # logged after only
    after["vict"][0]["time/update"] = 9.0  # wall clock: never compared
    figures = compare(before, after)
    assert figures["mismatched_keys"] == ["dapo: score/trees", "grpo: ppo/kl"]
    assert figures["mismatches"] == 2
    assert figures["keys_compared"] == 3 * len(CASES)  # kind, update and ppo/kl per case
    assert abs(figures["max_abs_diff"] - 2e-6) < 1e-12
