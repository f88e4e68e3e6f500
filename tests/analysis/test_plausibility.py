"""Plausibility: speedups above what the counted acceptance allows, baselines that drop with concurrency."""

from __future__ import annotations

import pytest

from autotune.analysis.plausibility import (
    BASELINE_SLACK, SPEEDUP_SLACK, implausible_baselines, implausible_speedup, speedup_bound,
)


def test_the_issue_example_is_implausible():
    """39.79x at depth 3 (issue 10): no configuration producing at most 4 tokens per pass does that."""
    reason = implausible_speedup(39.79, None, 3)
    assert reason is not None
    assert "39.79x" in reason and "depth 3" in reason and "4.80x" in reason
    reason = implausible_speedup(39.79, 2.5, 3)
    assert reason is not None and "2.50 tokens per target pass" in reason


def test_a_speedup_the_acceptance_allows_is_fine():
    assert implausible_speedup(1.8, 2.5, 3) is None
    assert implausible_speedup(0.6, 2.5, 3) is None  # slower than the baseline is always possible
    assert implausible_speedup(2.5 * (1 + SPEEDUP_SLACK), 2.5, 3) is None  # the bound itself is allowed


def test_the_bound_uses_the_counted_acceptance_length():
    assert speedup_bound(2.5, 3) == pytest.approx(2.5 * (1 + SPEEDUP_SLACK))
    assert implausible_speedup(3.5, 2.5, 3) is not None  # above 3.0, though depth 3 alone would allow 4.8


def test_without_acceptance_the_bound_falls_back_to_depth_plus_one():
    assert speedup_bound(None, 3) == pytest.approx(4 * (1 + SPEEDUP_SLACK))
    assert speedup_bound(None, 7) == pytest.approx(8 * (1 + SPEEDUP_SLACK))
    assert implausible_speedup(4.5, None, 3) is None
    assert implausible_speedup(5.0, None, 3) is not None


def test_the_bound_is_never_below_one_pass_per_token():
    assert speedup_bound(0.5, 3) == pytest.approx(1 + SPEEDUP_SLACK)
    assert speedup_bound(None, 0) == pytest.approx(1 + SPEEDUP_SLACK)  # method none: speedup about 1
    assert implausible_speedup(1.1, 1.0, 4) is None


def test_a_baseline_that_collapses_at_a_larger_batch_is_flagged():
    suspects = implausible_baselines({1: 259.0, 4: 33.0})
    assert list(suspects) == [4]
    assert "concurrency 4 (33.0 tokens/s)" in suspects[4] and "concurrency 1 (259.0 tokens/s)" in suspects[4]


def test_monotone_baselines_are_fine():
    assert implausible_baselines({1: 259.0, 2: 480.0, 4: 850.0, 8: 1400.0}) == {}
    assert implausible_baselines({}) == {}
    assert implausible_baselines({1: 259.0}) == {}


def test_small_dips_within_the_slack_are_fine():
    assert implausible_baselines({1: 259.0, 2: 250.0, 4: 240.0}) == {}
    assert implausible_baselines({1: 100.0, 2: 100.0 * (1 - BASELINE_SLACK)}) == {}  # exactly at the limit
    assert list(implausible_baselines({1: 100.0, 2: 100.0 * (1 - BASELINE_SLACK) - 0.1})) == [2]


def test_baselines_compare_with_the_fastest_smaller_batch_not_just_the_previous_one():
    suspects = implausible_baselines({1: 100.0, 2: 400.0, 4: 350.0, 8: 300.0, 16: 500.0})
    assert list(suspects) == [8]  # 300 < 0.8 * 400 (batch 2); 350 is within the slack; 16 recovered
    assert "concurrency 2 (400.0 tokens/s)" in suspects[8]


def test_concurrencies_are_taken_in_order_whatever_the_mapping_order():
    assert list(implausible_baselines({8: 30.0, 1: 259.0, 2: 300.0})) == [8]
