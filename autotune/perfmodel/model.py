"""The performance model: acceptance profile x cost profile -> tokens/s and TPOT, with uncertainty.

For a configuration (method, draft, depth) at a batch size the model replays the workload
(:func:`~autotune.perfmodel.simulate.simulate`) with Omega(depth) tokens per sequence-step from the
proposer's acceptance curve and the step and prefill costs of the cost profile. That raw
prediction is then corrected by what the study has measured so far, in two levels (each shrunk
towards 1 by ``PRIOR_WEIGHT`` pseudo-measurements, so one measurement moves it only halfway):

    c_all    = exp(mean of log(measured / raw) over every measured configuration)
    c_group  = exp(mean of the residual log ratio of that method (and draft) after c_all)
    tokens/s = raw x c_all x c_group

Uncertainty (relative, in logs; the 95 % interval is value x exp(+-1.96 sigma))::

    sigma^2 = (se(Omega) / Omega)^2            acceptance: binomial counts by position
            + spread^2                         cost: timing rounds' relative spread
            + sigma_model^2                    the residuals after correction, with a prior of
                                               PRIOR_SIGMA carrying PRIOR_WEIGHT_SIGMA measurements

``sigma_model`` includes one screening pass's noise, since residuals are measured against single
passes: it is the error of "predict, then measure once".
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autotune.engines.base import Measurement
from autotune.perfmodel.acceptance import AcceptanceCurve
from autotune.perfmodel.cost import BASELINE, CostProfile
from autotune.perfmodel.simulate import SimulatedRun, simulate

Z95 = 1.959964
PRIOR_WEIGHT = 1.0
PRIOR_SIGMA = 0.10  # before any residual: one screening pass varies ~10 % here (docs/benchmarks.md)
PRIOR_WEIGHT_SIGMA = 3.0
ConfigKey = tuple[str, "str | None"]  # (method, draft label or None)


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
    """Predicts any (method, draft, depth, batch size) of a study (see the module doc).

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
        self.sigma_model = PRIOR_SIGMA
        self.residuals: list[float] = []

    def can_predict(self, method: str, draft: str | None, depth: int) -> bool:
        key = config_key(method, draft)
        if not self.cost.has(method, key[1]):
            return False
        return method == BASELINE or (key in self.curves and self.curves[key].covers(depth))

    def raw(self, method: str, draft: str | None, depth: int, batch_size: int) -> RawPrediction:
        """The uncorrected replay of the workload (see :mod:`autotune.perfmodel.simulate`)."""
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

        run = simulate(self.prompts, self.lengths, batch_size, omega, step, prefill)
        return RawPrediction(run, omega, se / omega)

    def predict(self, method: str, draft: str | None, depth: int, batch_size: int) -> Prediction | None:
        """The corrected prediction, or None where a curve (or a cost) is missing."""
        if not self.can_predict(method, draft, depth):
            return None
        raw = self.raw(method, draft, depth, batch_size)
        correction = self.correction_all * self.corrections.get(config_key(method, draft), 1.0)
        value = raw.run.tokens_per_s * correction
        sigmas = {"acceptance": raw.sigma_acceptance, "cost": self.cost.spread, "model": self.sigma_model}
        sigma = math.sqrt(sum(s * s for s in sigmas.values()))
        tpot = [t / correction for t in raw.run.tpot_ms()]
        ttft = [t / correction for t in raw.run.ttft_ms()]
        # The same percentiles, computed the same way, as a measurement's.
        latency = {f"{name}_p{q}": value for name, values in (("tpot_ms", tpot), ("ttft_ms", ttft))
                   for q, value in zip((50, 90, 99), Measurement.latency_percentiles(values))}
        return Prediction(value, value * math.exp(-Z95 * sigma), value * math.exp(Z95 * sigma), sigma, sigmas,
                          raw.omega, correction, self.cost.source, latency)

    def calibrate(self, measured: Iterable[tuple[str, str | None, int, int, float]]) -> None:
        """Learn the corrections and sigma_model from measured (method, draft, depth, batch size,
        tokens/s) points (see the module doc); points the model cannot predict are skipped."""
        logs: dict[ConfigKey, list[float]] = defaultdict(list)
        for method, draft, depth, batch_size, tokens_per_s in measured:
            if tokens_per_s and tokens_per_s > 0 and self.can_predict(method, draft, depth):
                raw = self.raw(method, draft, depth, batch_size).run.tokens_per_s
                logs[config_key(method, draft)].append(math.log(tokens_per_s / raw))
        everything = [r for values in logs.values() for r in values]
        if not everything:
            return
        shift = sum(everything) / (len(everything) + PRIOR_WEIGHT)
        self.correction_all = math.exp(shift)
        self.corrections = {key: math.exp(sum(r - shift for r in values) / (len(values) + PRIOR_WEIGHT))
                            for key, values in logs.items()}
        self.residuals = [r - shift - math.log(self.corrections[key]) for key, values in logs.items() for r in values]
        self.sigma_model = math.sqrt((PRIOR_WEIGHT_SIGMA * PRIOR_SIGMA ** 2 + sum(e * e for e in self.residuals))
                                     / (PRIOR_WEIGHT_SIGMA + len(self.residuals)))

    def describe(self) -> dict[str, Any]:
        """What the model knows: curves' Omega by depth, corrections, sigma_model, cost summary."""
        return {
            "omega": {_name(key): [round(o, 4) for o in curve.omegas()] for key, curve in self.curves.items()},
            "steps": {_name(key): curve.steps for key, curve in self.curves.items()},
            "correction_all": self.correction_all,
            "corrections": {_name(key): value for key, value in self.corrections.items()},
            "sigma_model": self.sigma_model,
            "median_abs_residual": statistics.median([abs(math.expm1(r)) for r in self.residuals]) if self.residuals else None,
            "cost": self.cost.summary(),
        }


def _name(key: ConfigKey) -> str:
    method, draft = key
    return method if draft is None else f"{method}:{draft}"
