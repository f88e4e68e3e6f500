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


def test_where_the_schedule_serves_k_0_the_tuned_figure_is_k_0s() -> None:
    """Where none won and the vLLM schedule runs K = 0 (measured at 0.5x none), the served K = 0 is
    compared with that measured figure, not with none's: K = 0 is what the schedule server runs."""
    from dataclasses import replace

    from serving.test_offstate import kind_profile, row

    from autotune.validation.runner import tuned_tokens_per_s

    rows = (row("none", 0, 8, 800.0, number=0), row("mtp", 0, 8, 400.0, number=1, speedup=(0.5, 0.45, 0.55), off=True))
    profile = kind_profile("mtp", "constant-then-off", engine="vllm", measurements=rows)
    none_figure = next(r["tokens_per_s"] for r in profile.per_batch_size if r["batch_size"] == 8)
    assert tuned_tokens_per_s(profile, 8) == pytest.approx(none_figure * 0.5)
    assert tuned_tokens_per_s(profile, 1) == next(r["tokens_per_s"] for r in profile.per_batch_size if r["batch_size"] == 1)
    # an off state the study did not measure keeps the table's figure, and so does another engine's study
    assert tuned_tokens_per_s(replace(profile, measurements=rows[:1]), 8) == none_figure
    assert tuned_tokens_per_s(replace(profile, study=replace(profile.study, engine="embedded")), 8) == none_figure
    assert tuned_tokens_per_s(profile, 3) is None
