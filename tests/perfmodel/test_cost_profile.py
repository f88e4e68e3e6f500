"""Cost profiles: interpolation over depth and concurrency, the n-gram verify width, prefill fits
and the factored summary."""

from __future__ import annotations

import pytest

from autotune.perfmodel.cost import CostPoint, CostProfile, interpolate


def point(method: str, depth: int, concurrency: int, propose: float, verify: float, round_index: int = 0,
          prefill: float = 0.01, draft: str | None = None) -> CostPoint:
    return CostPoint(method, draft, depth, concurrency, propose, verify, prefill, concurrency * 10,
                     float(depth), round_index, 6)


def profile() -> CostProfile:
    points = [point("none", 0, b, 0.0, 0.001 * b) for b in (1, 4)]
    for depth in (1, 4):
        for b in (1, 4):
            points.append(point("draft", depth, b, 0.002 * depth * b, 0.001 * b * (1 + depth / 4), draft="builtin"))
            points.append(point("ngram", depth, b, 0.0001, 0.5, round_index=0))
    return CostProfile(points)


def test_interpolate_is_linear_inside_flat_below_and_extrapolated_above() -> None:
    assert interpolate([1, 3], [10, 30], 2) == 20
    assert interpolate([1, 3], [10, 30], 0.5) == 10
    assert interpolate([1, 3], [10, 30], 5) == 50
    assert interpolate([1], [7], 9) == 7


def test_step_time_interpolates_depth_and_concurrency() -> None:
    cost = profile()
    # Timed points come back exactly.
    assert cost.step_s("draft", "builtin", 4, 4) == pytest.approx(0.002 * 16 + 0.004 * 2)
    # Depth 2 is halfway between the timed depths 1 and 4 only in the linear sense: a third of the way.
    d1, d4 = cost.step_s("draft", "builtin", 1, 1), cost.step_s("draft", "builtin", 4, 1)
    assert cost.step_s("draft", "builtin", 2, 1) == pytest.approx(d1 + (d4 - d1) / 3)
    # Concurrency 2, between 1 and 4.
    assert cost.step_s("none", None, 0, 2) == pytest.approx(0.002)


def test_ngram_steps_take_the_verify_cost_of_their_width_from_the_baseline_and_draft_points() -> None:
    cost = profile()
    # Width 1 (nothing drafted) costs the baseline's verify, not the n-gram runs' 0.5 s.
    assert cost.step_s("ngram", None, 4, 1, width=1.0) == pytest.approx(0.0001 + 0.001)
    assert cost.step_s("ngram", None, 4, 1) == pytest.approx(0.0001 + 0.001 * 2)  # width 5 = draft@4's verify


def test_a_proposer_without_timings_is_a_key_error_and_has_reports_it() -> None:
    cost = profile()
    assert cost.has("draft", "builtin") and not cost.has("mtp")
    with pytest.raises(KeyError, match="no timing for mtp"):
        cost.step_s("mtp", None, 1, 1)


def test_prefill_is_a_linear_fit_in_padded_tokens() -> None:
    points = [CostPoint("none", None, 0, b, 0.0, 0.001, 0.002 + 0.0001 * b * 10, b * 10) for b in (1, 2, 4)]
    cost = CostProfile(points)
    assert cost.prefill_s("none", None, 80) == pytest.approx(0.002 + 0.0001 * 80)


def test_spread_is_the_relative_spread_between_kept_rounds() -> None:
    points = [point("none", 0, 1, 0.0, 0.010, 0), point("none", 0, 1, 0.0, 0.012, 1)]
    assert CostProfile(points).spread == pytest.approx(0.001414 / 0.011, rel=1e-3)


def test_a_point_is_the_median_of_its_rounds_not_the_mean() -> None:
    points = [point("none", 0, 1, 0.0, verify, i) for i, verify in enumerate((0.010, 0.011, 0.0125))]
    cost = CostProfile(points)
    assert cost.step_s("none", None, 0, 1) == pytest.approx(0.011)
    assert cost.dropped_rounds == 0


def test_rounds_slower_than_1_3x_the_fastest_are_dropped_counted_and_left_out_of_the_spread() -> None:
    # The mtp b8 point: one round 17x the other. The disturbed round must neither move the
    # value nor the spread; it is counted.
    rounds = (0.0120, 0.2049, 0.0126)
    points = [point("none", 0, 1, 0.0, verify, i) for i, verify in enumerate(rounds)]
    cost = CostProfile(points)
    assert cost.step_s("none", None, 0, 1) == pytest.approx(0.0123)
    assert cost.dropped_rounds == 1
    assert cost.summary()["dropped_rounds"] == 1
    assert cost.spread == pytest.approx(0.0006 / 2 ** 0.5 / 0.0123, rel=1e-3)
    # 1.3x the fastest is still kept.
    kept = CostProfile([point("none", 0, 1, 0.0, verify, i) for i, verify in enumerate((0.010, 0.013, 0.011))])
    assert kept.dropped_rounds == 0


def test_the_profile_spread_pools_points_by_root_mean_square() -> None:
    quiet = [point("none", 0, 1, 0.0, verify, i) for i, verify in enumerate((0.010, 0.010))]
    noisy = [point("none", 0, 4, 0.0, verify, i) for i, verify in enumerate((0.010, 0.012))]
    noisy_spread = 0.001414 / 0.011
    assert CostProfile(quiet + noisy).spread == pytest.approx((noisy_spread ** 2 / 2) ** 0.5, rel=1e-3)


def test_a_profile_needs_the_baseline() -> None:
    with pytest.raises(ValueError, match="baseline"):
        CostProfile([point("draft", 1, 1, 0.1, 0.1, draft="builtin")])


def test_summary_gives_verify_by_tokens_and_the_draft_step_per_token() -> None:
    summary = profile().summary()
    assert summary["verify_s"][4][1] == pytest.approx(0.004)
    assert summary["verify_s"][4][5] == pytest.approx(0.008)
    assert summary["propose"]["draft:builtin"][4]["per_token_s"] == pytest.approx(0.008)
    assert summary["propose"]["draft:builtin"][4]["fixed_s"] == pytest.approx(0.0, abs=1e-12)


def test_points_round_trip_through_dicts() -> None:
    p = point("draft", 2, 4, 0.1, 0.2, draft="builtin")
    assert CostPoint.from_dict(p.to_dict()) == p
