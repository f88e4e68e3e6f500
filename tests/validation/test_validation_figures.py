"""Every served figure as a mean over the runs with its 95 % Student-t interval, and the gap between
served and tuned throughput."""

from __future__ import annotations

import math

import pytest

from autotune.analysis.intervals import Estimate
from autotune.validation.figures import estimates, tuned_gap
from autotune.validation.loadgen import RunFigures
from autotune.validation.metrics import SpecCounters


def run(tokens_per_s: float, goodput: float | None = None) -> RunFigures:
    return RunFigures(tokens_per_s, 10.0, 12.0, 80.0, 120.0, 1.0, goodput, 16, 0)


def test_three_runs_give_a_t_interval_on_two_degrees_of_freedom() -> None:
    figures = estimates([run(100), run(110), run(120)], [SpecCounters(10, 20, 15)] * 3)
    tokens = figures["output_tokens_per_s"]
    half = 4.302653 * 10 / math.sqrt(3)  # t(0.975, 2) * s / sqrt(n), s = 10
    assert (tokens.value, tokens.n) == (110, 3)
    assert tokens.low == pytest.approx(110 - half, rel=1e-5) and tokens.high == pytest.approx(110 + half, rel=1e-5)
    assert figures["tpot_ms_p99"].value == 12.0
    assert figures["acceptance_rate"].value == pytest.approx(0.75)
    assert "goodput_requests_per_s" not in figures  # no SLO: vllm bench serve measured none


def test_one_run_has_no_interval_and_no_drafts_no_acceptance() -> None:
    figures = estimates([run(100, goodput=0.5)], [SpecCounters(0, 0, 0)])
    assert not figures["output_tokens_per_s"].has_interval
    assert figures["goodput_requests_per_s"].value == 0.5
    assert "acceptance_rate" not in figures


def test_the_gap_is_served_over_tuned_minus_one_with_the_served_interval() -> None:
    gap = tuned_gap(Estimate(90.0, 85.0, 95.0, 3), 100.0)
    assert (gap.value, gap.low, gap.high, gap.n) == pytest.approx((-0.10, -0.15, -0.05, 3))
    assert tuned_gap(Estimate(90.0), None) is None
    assert tuned_gap(Estimate(90.0), 0.0) is None
