"""The curves' y axes: a share reads on its whole range, and no other axis magnifies noise."""

from __future__ import annotations

import pytest

from agentcredit.report.curves import CURVES, y_range


def test_every_success_and_share_axis_is_fixed_to_its_whole_range_even_when_all_zero():
    units = {c.key: c.unit for c in CURVES}
    assert y_range(units["eval/success"], [0.0, 0.0, 0.0]) == [0.0, 1.0]
    assert y_range(units["rollout/success"], [0.25, 0.5]) == [0.0, 1.0]
    assert y_range(units["rollout/invalid_rate"], [0.0]) == [0.0, 1.0]
    assert y_range(units["credit/vict/abstain_pct"], [0.0, 100.0]) == [0.0, 100.0]


def test_a_flat_curve_gets_a_least_span_not_its_fifth_digit_magnified():
    # entropy 0.09358 → 0.09359: the span is 20% of 0.09359 (plus 5% padding each side)
    low, high = y_range("nats", [0.09358, 0.09359])
    assert high - low == pytest.approx(0.2 * 0.09359 * 1.1)
    assert (low + high) / 2 == pytest.approx(0.093585)
    low, high = y_range("KL", [0.0, 0.0])  # all zero: the absolute floor, 1e-3
    assert (low, high) == pytest.approx((-0.00055, 0.00055))
    low, high = y_range("advantage", [-2.0, 3.0])  # a real range is left as it is, padded
    assert (low, high) == pytest.approx((-2.25, 3.25))
