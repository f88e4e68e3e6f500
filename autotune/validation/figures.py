"""From runs to results: one run's figures over its steady window (:func:`run_figures`, the
definitions of :mod:`autotune.analysis.steady`, the same as a study's); each figure of a (server, concurrency) point as the mean over its runs with
a 95 % Student-t interval (:func:`autotune.analysis.intervals.mean_interval`, the project's one
construction for independent repetitions); the schedule server against each reference server as a
paired ratio over the rounds they ran in together (:func:`~autotune.analysis.intervals.
paired_ratio_interval`, as the protocol pairs a configuration with its baseline), with its verdict;
and the gap between tuned and served throughput.

**The verdict** ("the schedule is at least as fast as the other server") is the decision rule's
(:mod:`autotune.analysis.decision`): met when the paired ratio is within
:data:`~autotune.analysis.decision.PRACTICAL_MARGIN` (3 %) of 1 or above, and its interval reaches 1
(a schedule shown slower is not saved by a small margin, nor one 3 % behind by a wide interval). It
is judged only where the two servers serve different configurations at that concurrency; where they
serve the same one (the schedule's depth there is the fixed depth) the ratio is the spread of two
server starts and says nothing about the schedule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from autotune.analysis.decision import PRACTICAL_MARGIN
from autotune.analysis.intervals import Estimate, mean_interval, paired_ratio_interval
from autotune.analysis.steady import RequestResult, tpot_ms, ttft_ms, window_figures
from autotune.validation.metrics import SpecCounters

GOODPUT_KEYS = ("tpot_ms", "ttft_ms")  # the profile's SLO limits goodput checks
# RunFigures fields reported with an interval (the rest are counts and flags).
FIGURES = ("output_tokens_per_s", "requests_per_s", "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99", "tpot_ms_p50",
           "tpot_ms_p90", "tpot_ms_p99", "goodput_requests_per_s", "occupancy")
MET, MISSED = "met", "missed"


@dataclass(frozen=True)
class RunFigures:
    """One run at one concurrency over its steady window: output tokens/s, requests/s, TTFT and TPOT
    percentiles (ms), goodput (requests/s inside the window meeting every limit of the study's SLO;
    None without one), the window's length, mean occupancy and requests, and the run's completed
    requests."""

    output_tokens_per_s: float
    requests_per_s: float
    ttft_ms_p50: float | None
    ttft_ms_p90: float | None
    ttft_ms_p99: float | None
    tpot_ms_p50: float | None
    tpot_ms_p90: float | None
    tpot_ms_p99: float | None
    goodput_requests_per_s: float | None
    window_s: float
    occupancy: float
    window_requests: int
    steady: bool
    completed: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_figures(results: Sequence[RequestResult], concurrency: int, slo: dict[str, Any]) -> RunFigures:
    """The figures of one run (:func:`autotune.analysis.steady.window_figures`), goodput under ``slo``."""
    figures = window_figures(results, concurrency)
    window = figures.window
    limits = {key: float(slo[key]) for key in GOODPUT_KEYS if slo.get(key)}
    goodput = None
    if limits and window.length_s > 0:
        good = [r for r in results if window.contains(r) and _meets(r, limits)]
        goodput = len(good) / window.length_s
    return RunFigures(
        output_tokens_per_s=figures.tokens_per_s, requests_per_s=figures.requests_per_s,
        ttft_ms_p50=figures.ttft_ms[0], ttft_ms_p90=figures.ttft_ms[1], ttft_ms_p99=figures.ttft_ms[2],
        tpot_ms_p50=figures.tpot_ms[0], tpot_ms_p90=figures.tpot_ms[1], tpot_ms_p99=figures.tpot_ms[2],
        goodput_requests_per_s=goodput, window_s=window.length_s, occupancy=window.occupancy,
        window_requests=window.requests, steady=window.steady, completed=len(results))


def _meets(result: RequestResult, limits: dict[str, float]) -> bool:
    tpot = tpot_ms(result)
    return (ttft_ms(result) <= limits.get("ttft_ms", float("inf"))
            and (tpot is None or tpot <= limits.get("tpot_ms", float("inf"))))


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


@dataclass(frozen=True)
class Comparison:
    """The schedule server against ``other`` (``fixed`` or ``none``) at one concurrency: the paired
    ratio of output tokens/s over the rounds, whether the two served different configurations there,
    and the verdict (:data:`MET` / :data:`MISSED`; None where they served the same one)."""

    concurrency: int
    other: str
    ratio: Estimate
    differ: bool
    verdict: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "other": self.other, "ratio": self.ratio.to_dict(),
                "differ": self.differ, "verdict": self.verdict}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Comparison:
        return cls(int(data["concurrency"]), str(data["other"]), Estimate.from_dict(data["ratio"]),
                   bool(data["differ"]), data.get("verdict"))


def compare(concurrency: int, other: str, schedule_runs: Sequence[float], other_runs: Sequence[float],
            differ: bool) -> Comparison:
    """The schedule's tokens/s over ``other``'s, run by run (round r of one against round r of the
    other), with the verdict where the two ``differ`` (module doc)."""
    ratio = paired_ratio_interval(schedule_runs, other_runs)
    return Comparison(concurrency, other, ratio, differ, (MET if at_least(ratio) else MISSED) if differ else None)


def at_least(ratio: Estimate) -> bool:
    """The decision rule's "at least as fast" (module doc)."""
    reaches_one = ratio.high >= 1 if ratio.has_interval else ratio.value >= 1
    return ratio.value >= 1 - PRACTICAL_MARGIN and reaches_one


def tuned_gap(served: Estimate, tuned_tokens_per_s: float | None) -> Estimate | None:
    """served / tuned - 1 with the served figure's interval (the tuned figure is taken as given):
    -0.12 means the server delivers 12 % less than the study measured. None without a tuned figure."""
    if tuned_tokens_per_s is None or tuned_tokens_per_s <= 0:
        return None
    ratio = served.scaled(1 / tuned_tokens_per_s)
    return Estimate(ratio.value - 1, _minus_one(ratio.low), _minus_one(ratio.high), ratio.n, ratio.confidence)


def _minus_one(value: float | None) -> float | None:
    return None if value is None else value - 1
