"""From runs to results: each figure of a (server, concurrency) point as the mean over its runs with
a 95 % Student-t interval (:func:`autotune.analysis.intervals.mean_interval`, the project's one
construction for independent repetitions), and the gap between tuned and served throughput."""

from __future__ import annotations

from collections.abc import Sequence

from autotune.analysis.intervals import Estimate, mean_interval
from autotune.validation.loadgen import RunFigures
from autotune.validation.metrics import SpecCounters

# RunFigures fields reported with an interval (the rest are counts).
FIGURES = ("output_tokens_per_s", "tpot_ms_p50", "tpot_ms_p99", "ttft_ms_p50", "ttft_ms_p99", "requests_per_s",
           "goodput_requests_per_s")


def estimates(runs: Sequence[RunFigures], counters: Sequence[SpecCounters]) -> dict[str, Estimate]:
    """Every figure of :data:`FIGURES` that all runs measured, plus ``acceptance_rate`` where every
    run drafted tokens (vLLM's counters), each as an :class:`Estimate` over the runs."""
    out: dict[str, Estimate] = {}
    for name in FIGURES:
        values = [getattr(run, name) for run in runs]
        if values and all(value is not None for value in values):
            out[name] = mean_interval(values)
    rates = [count.acceptance_rate for count in counters]
    if rates and all(rate is not None for rate in rates):
        out["acceptance_rate"] = mean_interval(rates)
    return out


def tuned_gap(served: Estimate, tuned_tokens_per_s: float | None) -> Estimate | None:
    """served / tuned - 1 with the served figure's interval (the tuned figure is taken as given):
    -0.12 means the server delivers 12 % less than the study measured. None without a tuned figure."""
    if tuned_tokens_per_s is None or tuned_tokens_per_s <= 0:
        return None
    ratio = served.scaled(1 / tuned_tokens_per_s)
    return Estimate(ratio.value - 1, _minus_one(ratio.low), _minus_one(ratio.high), ratio.n, ratio.confidence)


def _minus_one(value: float | None) -> float | None:
    return None if value is None else value - 1
