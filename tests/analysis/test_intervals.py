"""Estimates and their 95 % intervals: Student-t means, paired ratios, coverage."""

from __future__ import annotations

import json
import math
import random

import pytest

from autotune.analysis.intervals import CONFIDENCE, Estimate, mean_interval, paired_ratio_interval, t_quantile

T_2 = 4.302652729911275  # Student-t, 2 degrees of freedom, 97.5 % quantile (two-sided 95 %)
T_4 = 2.7764451051977987


def test_t_quantile_matches_the_tables():
    assert t_quantile(2) == pytest.approx(T_2)
    assert t_quantile(4) == pytest.approx(T_4)
    assert t_quantile(1_000_000) == pytest.approx(1.959964, abs=1e-4)  # the normal quantile in the limit
    assert t_quantile(2, 0.90) == pytest.approx(2.919986, abs=1e-5)


def test_mean_interval_by_hand():
    estimate = mean_interval([10, 12, 14])
    half = T_2 * 2 / math.sqrt(3)  # s = 2
    assert estimate.value == pytest.approx(12)
    assert estimate.low == pytest.approx(12 - half) and estimate.high == pytest.approx(12 + half)
    assert estimate.n == 3 and estimate.confidence == CONFIDENCE and estimate.has_interval
    assert estimate.relative_half_width == pytest.approx(half / 12)


def test_mean_interval_of_five():
    samples = [100.0, 104.0, 98.0, 101.0, 97.0]
    mean = sum(samples) / 5
    s = math.sqrt(sum((v - mean) ** 2 for v in samples) / 4)
    estimate = mean_interval(samples)
    assert estimate.value == pytest.approx(100.0)
    assert estimate.high - estimate.value == pytest.approx(T_4 * s / math.sqrt(5))
    assert estimate.value - estimate.low == pytest.approx(T_4 * s / math.sqrt(5))


def test_identical_samples_have_a_zero_width_interval():
    estimate = mean_interval([5.0, 5.0, 5.0])
    assert estimate.low == estimate.high == 5.0 and estimate.relative_half_width == 0


def test_one_sample_gives_no_interval():
    estimate = mean_interval([42.0])
    assert estimate == Estimate(42.0, None, None, 1)
    assert not estimate.has_interval and estimate.relative_half_width is None
    assert not estimate.excludes(0) and not estimate.excludes(100)
    assert estimate.describe() == "42.0 (n=1, no interval)"
    assert Estimate.single(42) == estimate


def test_no_samples_is_an_error():
    with pytest.raises(ValueError, match="no samples"):
        mean_interval([])


def test_relative_half_width_of_a_zero_value_is_none():
    assert Estimate(0.0, -1.0, 1.0, 3).relative_half_width is None


def test_excludes():
    estimate = Estimate(1.3, 1.1, 1.5, 5)
    assert estimate.excludes(1.0) and estimate.excludes(1.6)
    assert not estimate.excludes(1.2) and not estimate.excludes(1.1) and not estimate.excludes(1.5)


def test_scaled_and_inverse():
    estimate = Estimate(2.0, 1.6, 2.5, 4)
    assert estimate.scaled(10) == Estimate(20.0, 16.0, 25.0, 4)
    inverse = estimate.inverse()
    assert inverse.value == pytest.approx(0.5)
    assert inverse.low == pytest.approx(1 / 2.5) and inverse.high == pytest.approx(1 / 1.6)  # the ends swap
    assert inverse.n == 4
    assert inverse.inverse().low == pytest.approx(1.6) and inverse.inverse().high == pytest.approx(2.5)
    single = Estimate.single(4.0)
    assert single.inverse() == Estimate(0.25, None, None, 1) and single.scaled(2) == Estimate(8.0, None, None, 1)


def test_to_dict_from_dict_round_trip_through_json():
    for estimate in (mean_interval([10, 12, 14]), Estimate.single(3.5), Estimate(1.5, 1.4, 1.6, 7, 0.9)):
        data = json.loads(json.dumps(estimate.to_dict()))
        assert set(data) == {"value", "low", "high", "n", "confidence"}
        assert Estimate.from_dict(data) == estimate


def test_from_dict_defaults():
    assert Estimate.from_dict({"value": 3}) == Estimate(3.0, None, None, 1, CONFIDENCE)


def test_describe():
    assert Estimate(412.3, 400.0, 424.6, 5).describe() == "412.3 ±3.0% (n=5)"
    assert Estimate(1.234, 1.2, 1.268, 3).describe(digits=2, unit="x") == "1.23x ±2.8% (n=3)"


# --- paired ratios ---------------------------------------------------------------------------------


def test_identical_ratios_give_a_zero_width_interval():
    estimate = paired_ratio_interval([150, 300, 75], [100, 200, 50])
    assert estimate.value == pytest.approx(1.5)
    assert estimate.low == pytest.approx(1.5) and estimate.high == pytest.approx(1.5)
    assert estimate.n == 3


def test_paired_ratio_is_the_geometric_mean_of_the_ratios():
    estimate = paired_ratio_interval([2.0, 8.0], [1.0, 1.0])
    assert estimate.value == pytest.approx(4.0)  # sqrt(2 * 8), not the arithmetic 5
    logs = [math.log(2.0), math.log(8.0)]
    half = t_quantile(1) * (abs(logs[1] - logs[0]) / math.sqrt(2)) / math.sqrt(2)
    assert estimate.low == pytest.approx(4.0 * math.exp(-half))
    assert estimate.high == pytest.approx(4.0 * math.exp(half))


def test_paired_ratio_of_the_other_way_round_is_the_inverse():
    a, b = [150.0, 160.0, 149.0, 155.0], [100.0, 104.0, 101.0, 99.0]
    forward, backward = paired_ratio_interval(a, b), paired_ratio_interval(b, a)
    assert backward.value == pytest.approx(1 / forward.value)
    assert backward.low == pytest.approx(1 / forward.high) and backward.high == pytest.approx(1 / forward.low)


def test_one_pair_gives_no_interval():
    estimate = paired_ratio_interval([3.0], [2.0])
    assert estimate.value == pytest.approx(1.5) and not estimate.has_interval


def test_pairing_cancels_a_shared_drift():
    """Each round's machine state multiplies both passes by the same large factor: the paired ratio
    stays tight around the true 1.5 while the two independent means are too wide to compare."""
    rng = random.Random(1234)
    a, b = [], []
    for _ in range(8):
        drift = rng.uniform(0.4, 2.5)  # the machine in this round: shared by both passes
        b.append(100.0 * drift * rng.gauss(1, 0.01))
        a.append(150.0 * drift * rng.gauss(1, 0.01))
    paired = paired_ratio_interval(a, b)
    assert paired.low < 1.5 < paired.high
    assert paired.relative_half_width < 0.03

    mean_a, mean_b = mean_interval(a), mean_interval(b)
    # The ratio of the two independent intervals: [low_a / high_b, high_a / low_b] (or unbounded).
    unpaired_low = mean_a.low / mean_b.high
    unpaired_high = mean_a.high / mean_b.low if mean_b.low > 0 else math.inf
    assert unpaired_low < paired.low and paired.high < unpaired_high
    assert (unpaired_high - unpaired_low) > 10 * (paired.high - paired.low)
    assert mean_a.relative_half_width > 10 * paired.relative_half_width


@pytest.mark.parametrize(
    ("numerators", "denominators", "match"),
    [
        ([1.0, 2.0], [1.0], "differ in length"),
        ([1.0, 0.0], [1.0, 1.0], "positive"),
        ([1.0, 2.0], [1.0, -2.0], "positive"),
        ([], [], "no samples"),
    ],
)
def test_paired_ratio_errors(numerators, denominators, match):
    with pytest.raises(ValueError, match=match):
        paired_ratio_interval(numerators, denominators)


def test_coverage_is_about_95_percent():
    """Over many seeded experiments of n = 5 gaussian samples, the 95 % interval holds the true
    mean about 95 % of the time (t, not z: with z it would be ~88 %)."""
    rng = random.Random(20240611)
    true_mean, sigma, experiments = 200.0, 15.0, 1000
    covered = 0
    for _ in range(experiments):
        estimate = mean_interval([rng.gauss(true_mean, sigma) for _ in range(5)])
        covered += estimate.low <= true_mean <= estimate.high
    assert 0.93 <= covered / experiments <= 0.97, covered


def test_paired_ratio_coverage_is_about_95_percent():
    rng = random.Random(7)
    covered, experiments = 0, 600
    for _ in range(experiments):
        drifts = [rng.uniform(0.5, 2.0) for _ in range(5)]
        a = [1.5 * d * math.exp(rng.gauss(0, 0.05)) for d in drifts]
        b = [d * math.exp(rng.gauss(0, 0.05)) for d in drifts]
        estimate = paired_ratio_interval(a, b)
        covered += estimate.low <= 1.5 <= estimate.high
    assert 0.93 <= covered / experiments <= 0.97, covered
