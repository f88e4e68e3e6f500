"""A run's figures over its steady window with goodput under the study's SLO; every served figure as
a mean over the runs with its 95 % Student-t interval; the schedule's paired ratio to another server
with the decision rule's verdict; and the gap between served and tuned throughput."""

from __future__ import annotations

import math

import pytest

from autotune.analysis.intervals import Estimate
from autotune.analysis.steady import RequestResult
from autotune.validation.figures import MET, MISSED, Comparison, RunFigures, compare, estimates, run_figures, tuned_gap
from autotune.validation.metrics import SpecCounters


def run(tokens_per_s: float, goodput: float | None = None) -> RunFigures:
    return RunFigures(output_tokens_per_s=tokens_per_s, requests_per_s=1.0, ttft_ms_p50=80.0, ttft_ms_p90=100.0,
                      ttft_ms_p99=120.0, tpot_ms_p50=10.0, tpot_ms_p90=11.0, tpot_ms_p99=12.0,
                      goodput_requests_per_s=goodput, window_s=8.0, occupancy=0.98, window_requests=12, steady=True,
                      completed=16)


def test_three_runs_give_a_t_interval_on_two_degrees_of_freedom() -> None:
    figures = estimates([run(100), run(110), run(120)], [SpecCounters(10, 20, 15)] * 3)
    tokens = figures["output_tokens_per_s"]
    half = 4.302653 * 10 / math.sqrt(3)  # t(0.975, 2) * s / sqrt(n), s = 10
    assert (tokens.value, tokens.n) == (110, 3)
    assert tokens.low == pytest.approx(110 - half, rel=1e-5) and tokens.high == pytest.approx(110 + half, rel=1e-5)
    assert figures["tpot_ms_p99"].value == 12.0
    assert figures["acceptance_rate"].value == pytest.approx(0.75)
    assert figures["occupancy"].value == pytest.approx(0.98)
    assert "goodput_requests_per_s" not in figures  # no SLO: no goodput


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

    from serving.test_off_depths import kind_profile, row

    from autotune.validation.runner import tuned_tokens_per_s

    rows = (row("none", 0, 8, 800.0, number=0), row("mtp", 0, 8, 400.0, number=1, speedup=(0.5, 0.45, 0.55), off=True))
    profile = kind_profile("mtp", "constant-then-off", engine="vllm", measurements=rows)
    none_figure = next(r["tokens_per_s"] for r in profile.per_concurrency if r["concurrency"] == 8)
    assert tuned_tokens_per_s(profile, 8) == pytest.approx(none_figure * 0.5)
    assert tuned_tokens_per_s(profile, 1) == next(r["tokens_per_s"] for r in profile.per_concurrency if r["concurrency"] == 1)
    # an off state the study did not measure keeps the table's figure, and so does another engine's study
    assert tuned_tokens_per_s(replace(profile, measurements=rows[:1]), 8) == none_figure
    assert tuned_tokens_per_s(replace(profile, study=replace(profile.study, engine="embedded")), 8) == none_figure
    assert tuned_tokens_per_s(profile, 3) is None


def test_the_schedule_against_another_server_is_paired_round_by_round() -> None:
    # Round 2 was slow for both (a drift of the machine): the pairs cancel it, the means would not.
    comparison = compare(4, "fixed", [110.0, 55.0, 112.0], [100.0, 50.0, 100.0], differ=True)
    assert comparison.ratio.n == 3 and comparison.ratio.value == pytest.approx((1.1 * 1.1 * 1.12) ** (1 / 3))
    assert comparison.ratio.low > 1 and comparison.verdict == MET
    assert Comparison.from_dict(comparison.to_dict()) == comparison


@pytest.mark.parametrize(("schedule", "verdict"), [
    ([98.0, 98.5, 97.8], MISSED),  # ~2 % behind, but shown slower: its interval stays below 1
    ([99.0, 97.0, 101.0], MET),  # 1 % behind, interval reaches 1: within the 3 % practical margin
    ([95.0, 90.0, 100.0], MISSED),  # reaches 1, but 5 % behind: more than the margin
    ([104.0, 106.0, 105.0], MET),
])
def test_at_least_as_fast_is_the_decision_rules_practical_margin(schedule, verdict) -> None:
    assert compare(1, "fixed", schedule, [100.0, 100.0, 100.0], differ=True).verdict == verdict


def test_where_both_serve_the_same_configuration_nothing_is_judged() -> None:
    comparison = compare(2, "fixed", [90.0, 91.0], [100.0, 99.0], differ=False)
    assert comparison.verdict is None and comparison.ratio.value < 1  # the ratio is still reported


def test_the_figures_are_the_steady_windows_and_goodput_follows_the_slo() -> None:
    # Concurrency 2, five requests: the window runs from the first finish (2.0) to the fourth (4.0).
    results = [RequestResult([1, 2, 3], 0.0, [0.5, 1.5, 2.0], 2.0), RequestResult([1, 2, 3], 0.0, [1.0, 2.0, 3.0], 3.0),
               RequestResult([1, 2, 3], 2.0, [2.5, 3.0, 3.5], 3.5), RequestResult([1, 2], 3.0, [3.2, 4.0], 4.0),
               RequestResult([1, 2, 3], 3.5, [4.5, 5.0, 5.5], 5.5)]
    figures = run_figures(results, 2, {"tpot_ms": 600, "ttft_ms": None})
    assert (figures.window_s, figures.steady, figures.completed) == (2.0, True, 5)
    assert figures.output_tokens_per_s == pytest.approx(6 / 2.0)  # tokens that arrived in (2.0, 4.0]
    assert figures.window_requests == 3 and figures.requests_per_s == pytest.approx(3 / 2.0)  # finished in it
    # inside the window: requests 3 (TPOT 500 ms) and 4 (800 ms): one meets 600 ms
    assert figures.goodput_requests_per_s == pytest.approx(1 / 2.0)
    assert run_figures(results, 2, {}).goodput_requests_per_s is None
