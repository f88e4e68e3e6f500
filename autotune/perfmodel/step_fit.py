"""Calibration from a stored real-engine cost profile: the achieved bandwidth and the engine's step
overhead fitted to the plain decoding steps a tune timed on the same GPU model and engine.

A tune's timing runs (:mod:`autotune.search.modeling`) store, per concurrency ``b``, the seconds of
one plain decoding step of the tuned target (method ``none``). The roofline of that step
(:mod:`autotune.perfmodel.roofline`) is::

    step(b) = memory(b) / f + kernels x kernel latency + all-reduces + P

with ``memory(b)`` the step's bytes over the *peak* bandwidth, ``f`` the achieved share of it and
``P`` the engine's step overhead. Over the timed concurrency levels where the roofline is memory-bound
this is a line in ``memory(b)``: slope ``1 / f``, intercept ``P`` (least squares). The slope fixes
``f`` only when ``memory(b)`` spans more than :data:`MIN_MEMORY_SPAN` of the mean step across the
points and gives a share in (0, 1]; otherwise (a small target reads its weights in microseconds,
so the steps differ by noise) ``f`` stays the assumed or probed one and
``P = median(step(b) - memory(b) / f - kernels x latency - all-reduces)``. ``P`` is never below 0.

Not fitted: the per-kernel latency (one target cannot tell it from ``P``: it stays the catalog's),
the compute share (compute-bound points are left out), the context (the points' prompt length is
taken as the cached context: a tune's workload is short, so KV reads are small next to weights).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from autotune.hardware.catalog import AcceleratorSpec
from autotune.perfmodel.cost import BASELINE, CostPoint, CostProfile
from autotune.perfmodel.roofline import ModelShape, forward_pass

# The memory time must vary by this share of the mean step across the points for the slope to say
# anything about the bandwidth (below it the spread is of the order of the timing noise).
MIN_MEMORY_SPAN = 0.25


@dataclass(frozen=True)
class StepFit:
    """What a stored cost profile says of a GPU model and engine (module doc): the engine's step
    overhead in microseconds, the achieved bandwidth share (None: not identifiable from these
    points), how many concurrency levels it rests on, and which profile (``label``)."""

    pass_overhead_us: float
    bandwidth_fraction: float | None
    concurrencies: int
    label: str

    def describe(self) -> str:
        """The calibration's words for a plan."""
        bandwidth = (f"bandwidth {self.bandwidth_fraction:.2f} of peak" if self.bandwidth_fraction is not None
                     else "bandwidth not identifiable from it")
        return (f"step overhead {self.pass_overhead_us:.0f} us and {bandwidth}, fitted to {self.label} "
                f"({self.concurrencies} concurrency levels)")


def fit_step_costs(spec: AcceleratorSpec, shape: ModelShape, points: Sequence[CostPoint], label: str) -> StepFit | None:
    """Fit the step overhead (and the bandwidth share where the points allow) of ``spec`` — the GPU
    as the tune ran it: one GPU, the target's dtype, the achieved fractions to start from — to the
    baseline ``points`` of the target of shape ``shape`` (module doc); None without a memory-bound
    baseline point."""
    baseline = [p for p in points if p.method == BASELINE and p.depth == 0]
    if not baseline:
        return None
    profile = CostProfile(baseline)  # the median of each point's rounds
    peak = replace(spec, bandwidth_fraction=1.0, pass_overhead_us=0.0)
    xs, ys = [], []
    for rows in sorted({p.concurrency for p in baseline}):
        context = max(p.prefill_tokens for p in baseline if p.concurrency == rows) / rows
        roof = forward_pass(peak, shape, rows, 1, context)
        if roof.memory_s / spec.bandwidth_fraction < roof.compute_s:
            continue  # compute-bound: says nothing about the bandwidth or P here
        xs.append(roof.memory_s)
        ys.append(profile.step_s(BASELINE, None, 0, rows) - roof.overhead_s - roof.comm_s)
    if not xs:
        return None
    fraction = _slope_fraction(xs, ys, spec.bandwidth_fraction)
    share = fraction or spec.bandwidth_fraction
    overhead_s = statistics.median(y - x / share for x, y in zip(xs, ys))
    return StepFit(max(overhead_s, 0.0) * 1e6, fraction, len(xs), label)


def _slope_fraction(xs: Sequence[float], ys: Sequence[float], assumed: float) -> float | None:
    """``1 / slope`` of the least-squares line through (xs, ys) when xs span enough (module doc)."""
    if len(xs) < 2:
        return None
    mean_step = statistics.fmean(ys) + statistics.fmean(xs) / assumed
    if (max(xs) - min(xs)) / assumed < MIN_MEMORY_SPAN * mean_step:
        return None
    slope = statistics.linear_regression(xs, ys).slope
    return 1.0 / slope if slope >= 1.0 else None
