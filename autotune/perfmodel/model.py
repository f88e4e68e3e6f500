"""The performance model: acceptance profile x cost profile -> tokens/s and TPOT, with uncertainty.

For a configuration (method, draft, depth) at a concurrency the model replays the workload's
steady-state stream (:func:`~autotune.perfmodel.simulate.simulate`) with Omega(depth) tokens per sequence-step from the
proposer's acceptance curve and the step and prefill costs of the cost profile. That raw
prediction is then corrected by what the study has measured so far, in three levels, each the
shrunk mean of its log residuals r = log(measured / raw) (:func:`shrunk_mean`)::

    c_all    = exp(shrunk mean of r over every measured configuration)
    c_group  = exp(shrunk mean of r - log c_all over that method's (and draft's) configurations)
    c_cell   = exp(shrunk mean of r - log c_all - log c_group over that method's (and draft's)
                   configurations at the same concurrency)
    tokens/s = raw x c_all x c_group x c_cell

The cell level is there because the raw replay's error depends on the concurrency: in the guided
benchmark drafts were predicted right at batch 8 and ~10 % high at batches 1 and 2, so the method
level could not correct both, every depth of the flat band at batches 1 and 2 stayed open, and each
study measured all of them (docs/benchmarks.md).

A level applies only with at least ``MIN_RESIDUALS`` residuals (one residual cannot tell a shift
from a noisy pass: a single +41 % screening outlier used to raise every later prediction by a
third), and is shrunk toward 0 by its residuals' number and spread (empirical Bayes, see
:func:`shrunk_mean`): a consistent shift is kept, a scattered one mostly dropped.

Uncertainty (relative, in logs; the 95 % interval is value x exp(+-1.96 sigma))::

    sigma^2 = (se(Omega) / Omega)^2            acceptance: binomial counts by position
            + spread^2                         cost: timing rounds' relative spread (kept rounds)
            + sigma_model^2                    leave-one-out errors, with a prior of PRIOR_SIGMA
                                               carrying PRIOR_WEIGHT_SIGMA measurements

``sigma_model`` comes from leave-one-out errors: each measured point predicted by the corrections
fitted on the *other* points. Residuals left after correcting with themselves are too small (the
correction has absorbed part of them), so the uncertainty would be fitted on what it corrects.
It includes one screening pass's noise, since the points are single passes: it is the error of
"predict, then measure once". The rules and their reasons: docs/statistics.md.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from autotune.perfmodel.acceptance import AcceptanceCurve
from autotune.perfmodel.cost import BASELINE, CostProfile
from autotune.perfmodel.simulate import SimulatedRun, simulate

Z95 = 1.959964
MIN_RESIDUALS = 2  # a correction level needs at least this many residuals (module doc)
PRIOR_SIGMA = 0.10  # before any residual: one screening pass varies ~10 % here (docs/benchmarks.md)
PRIOR_WEIGHT_SIGMA = 3.0
ConfigKey = tuple[str, "str | None"]  # (method, draft label or None)
Residual = tuple[ConfigKey, "int | None", float]  # (group, concurrency, log(measured / raw))


def config_key(method: str, draft: str | None) -> ConfigKey:
    return method, draft if method == "draft" else None


@dataclass(frozen=True)
class Prediction:
    """A predicted point: central values, the 95 % interval of tokens/s, and where it came from."""

    tokens_per_s: float
    low: float
    high: float
    sigma: float
    sigmas: dict[str, float]
    omega: float
    correction: float
    source: str
    latency_ms: dict[str, float | None] = field(default_factory=dict)  # tpot_ms_p50 ... ttft_ms_p99

    def __getattr__(self, name: str) -> Any:
        # Latency figures read by name, like a Measurement's, so SLO checks work on a prediction.
        latency = self.__dict__.get("latency_ms", {})
        if name in latency:
            return latency[name]
        raise AttributeError(name)

    def bound(self, z: float) -> tuple[float, float]:
        """(low, high) tokens/s at ``z`` standard deviations."""
        return self.tokens_per_s * math.exp(-z * self.sigma), self.tokens_per_s * math.exp(z * self.sigma)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"tokens_per_s": {"value": self.tokens_per_s, "low": self.low, "high": self.high}}
        for name, value in self.latency_ms.items():
            if value is not None:
                data[name] = {"value": value, "low": value * math.exp(-Z95 * self.sigma),
                              "high": value * math.exp(Z95 * self.sigma)}
        data.update(omega=self.omega, sigma=self.sigma, sigmas=self.sigmas, correction=self.correction,
                    source=self.source)
        return data


@dataclass(frozen=True)
class RawPrediction:
    run: SimulatedRun
    omega: float
    sigma_acceptance: float


class PerformanceModel:
    """Predicts any (method, draft, depth, concurrency) of a study (see the module doc).

    ``curves`` and the cost profile are keyed by (method, draft label); ``prompts`` and ``lengths``
    are the workload's prompt and output token counts, request by request.
    """

    def __init__(self, cost: CostProfile, curves: Mapping[ConfigKey, AcceptanceCurve], prompts: Sequence[int],
                 lengths: Sequence[int]) -> None:
        self.cost = cost
        self.curves = dict(curves)
        self.prompts = list(prompts)
        self.lengths = list(lengths)
        self.correction_all = 1.0
        self.corrections: dict[ConfigKey, float] = {}
        self.cell_corrections: dict[tuple[ConfigKey, int], float] = {}
        self.sigma_model = PRIOR_SIGMA
        self.residuals: list[float] = []

    def can_predict(self, method: str, draft: str | None, depth: int) -> bool:
        key = config_key(method, draft)
        if not self.cost.has(method, key[1]):
            return False
        return method == BASELINE or (key in self.curves and self.curves[key].covers(depth))

    def raw(self, method: str, draft: str | None, depth: int, concurrency: int) -> RawPrediction:
        """The uncorrected replay of the workload's stream (see :mod:`autotune.perfmodel.simulate`)."""
        key = config_key(method, draft)
        if method == BASELINE:
            omega, se = 1.0, 0.0
            width = None
        else:
            curve = self.curves[key]
            omega, se = curve.omega(depth), curve.omega_se(depth)
            drafted = [curve.drafted_rate(i) for i in range(1, depth + 1)]

            def width(rows: int) -> float:
                # The widest of ``rows`` rows verifies 1 + sum_i P(some row drafted >= i).
                return 1 + sum(1 - (1 - d) ** rows for d in drafted)

        def step(rows: int) -> float:
            return self.cost.step_s(method, key[1], depth, rows, width(rows) if width and method == "ngram" else None)

        def prefill(tokens: int) -> float:
            return self.cost.prefill_s(method, key[1], tokens)

        run = simulate(self.prompts, self.lengths, concurrency, omega, step, prefill)
        return RawPrediction(run, omega, se / omega)

    def predict(self, method: str, draft: str | None, depth: int, concurrency: int) -> Prediction | None:
        """The corrected prediction, or None where a curve (or a cost) is missing."""
        if not self.can_predict(method, draft, depth):
            return None
        raw = self.raw(method, draft, depth, concurrency)
        key = config_key(method, draft)
        correction = (self.correction_all * self.corrections.get(key, 1.0)
                      * self.cell_corrections.get((key, concurrency), 1.0))
        value = raw.run.tokens_per_s * correction
        sigmas = {"acceptance": raw.sigma_acceptance, "cost": self.cost.spread, "model": self.sigma_model}
        sigma = math.sqrt(sum(s * s for s in sigmas.values()))
        # The window's percentiles, computed the same way as a measurement's, scaled as the throughput.
        figures = raw.run.figures
        latency = {f"{name}_p{q}": (value / correction if value is not None else None)
                   for name, values in (("tpot_ms", figures.tpot_ms), ("ttft_ms", figures.ttft_ms))
                   for q, value in zip((50, 90, 99), values)}
        return Prediction(value, value * math.exp(-Z95 * sigma), value * math.exp(Z95 * sigma), sigma, sigmas,
                          raw.omega, correction, self.cost.source, latency)

    def calibrate(self, measured: Iterable[tuple[str, str | None, int, int, float]]) -> None:
        """Learn the corrections and sigma_model from measured (method, draft, depth, concurrency,
        tokens/s) points (see the module doc); points the model cannot predict are skipped."""
        logs: list[Residual] = []
        for method, draft, depth, concurrency, tokens_per_s in measured:
            if tokens_per_s and tokens_per_s > 0 and self.can_predict(method, draft, depth):
                raw = self.raw(method, draft, depth, concurrency).run.tokens_per_s
                logs.append((config_key(method, draft), concurrency, math.log(tokens_per_s / raw)))
        if not logs:
            return
        fitted = corrections(logs)
        self.correction_all = math.exp(fitted.shift)
        self.corrections = {key: math.exp(value) for key, value in fitted.groups.items()}
        self.cell_corrections = {cell: math.exp(value) for cell, value in fitted.cells.items()}
        self.residuals = loo_errors(logs)
        self.sigma_model = math.sqrt((PRIOR_WEIGHT_SIGMA * PRIOR_SIGMA ** 2 + sum(e * e for e in self.residuals))
                                     / (PRIOR_WEIGHT_SIGMA + len(self.residuals)))

    def describe(self) -> dict[str, Any]:
        """What the model knows: curves' Omega by depth, corrections, sigma_model, cost summary."""
        return {
            "omega": {_name(key): [round(o, 4) for o in curve.omegas()] for key, curve in self.curves.items()},
            "steps": {_name(key): curve.steps for key, curve in self.curves.items()},
            "correction_all": self.correction_all,
            "corrections": {_name(key): value for key, value in self.corrections.items()},
            "cell_corrections": {f"{_name(key)} c{concurrency}": value
                                 for (key, concurrency), value in self.cell_corrections.items()},
            "sigma_model": self.sigma_model,
            "median_abs_loo_error": statistics.median([abs(math.expm1(r)) for r in self.residuals]) if self.residuals else None,
            "cost": self.cost.summary(),
        }


def _name(key: ConfigKey) -> str:
    method, draft = key
    return method if draft is None else f"{method}:{draft}"


def shrunk_mean(residuals: Sequence[float]) -> float:
    """The mean of log residuals, shrunk toward 0 (no correction) by their number and spread; 0
    with fewer than ``MIN_RESIDUALS``.

    Empirical Bayes for one normal mean: the true shift mu ~ N(0, tau^2) a priori, the residuals
    r_1..r_n ~ N(mu, s^2). The posterior mean is r_bar x tau^2 / (tau^2 + s^2 / n), i.e. the sum
    of the residuals over n + k with a prior weight of k = s^2 / tau^2 pseudo-residuals at 0.
    tau^2 is estimated from the same residuals, by moments (E[r_bar^2] = tau^2 + s^2 / n):

        tau^2 = max(0, r_bar^2 - s^2 / n),  s^2 the sample variance (n - 1)
        shrunk = r_bar x max(0, 1 - s^2 / (n r_bar^2))          (positive-part James-Stein)

    A shift within its own standard error (|r_bar| <= s / sqrt(n)) is dropped; one many standard
    errors away is kept almost whole.
    """
    n = len(residuals)
    if n < MIN_RESIDUALS:
        return 0.0
    mean = statistics.fmean(residuals)
    if mean == 0:
        return 0.0
    noise = statistics.variance(residuals) / n  # s^2 / n: the mean's sampling variance
    return mean * max(0.0, 1.0 - noise / (mean * mean))


class Corrections(NamedTuple):
    """The fitted log corrections of the three levels (see the module doc)."""

    shift: float
    groups: dict[ConfigKey, float]
    cells: dict[tuple[ConfigKey, int], float]

    def of(self, key: ConfigKey, concurrency: int | None) -> float:
        """The log correction of ``key`` at ``concurrency``, all three levels summed."""
        return self.shift + self.groups.get(key, 0.0) + self.cells.get((key, concurrency), 0.0)


def corrections(logs: Sequence[Residual]) -> Corrections:
    """The corrections from (group, concurrency, log residual) triples (see the module doc); a
    concurrency of None takes no part in the cell level."""
    shift = shrunk_mean([r for _, _, r in logs])
    by_group: dict[ConfigKey, list[float]] = defaultdict(list)
    for key, _, r in logs:
        by_group[key].append(r - shift)
    groups = {key: shrunk_mean(values) for key, values in by_group.items()}
    by_cell: dict[tuple[ConfigKey, int], list[float]] = defaultdict(list)
    for key, concurrency, r in logs:
        if concurrency is not None:
            by_cell[(key, concurrency)].append(r - shift - groups[key])
    return Corrections(shift, groups, {cell: shrunk_mean(values) for cell, values in by_cell.items()})


def loo_errors(logs: list[Residual]) -> list[float]:
    """Leave-one-out log errors: each point's residual minus the correction fitted without it."""
    return [r - corrections(logs[:i] + logs[i + 1:]).of(key, concurrency)
            for i, (key, concurrency, r) in enumerate(logs)]
