"""Confidence intervals for repeated measurements, and for ratios of paired ones.

A figure the tool reports is an :class:`Estimate`: a central value, a 95 % interval and the number
of repetitions it rests on. Two constructions, both Student-t on n - 1 degrees of freedom:

* :func:`mean_interval` — the mean of n independent repetitions, ``mean ± t * s / sqrt(n)``
  (what AIPerf reports for multi-run confidence).
* :func:`paired_ratio_interval` — the ratio of two configurations measured in the same rounds
  (A B A B ...): the geometric mean of the per-round ratios a_i / b_i, with the t interval taken on
  log(a_i / b_i) and exponentiated. Pairing cancels what the two passes of one round share (the
  machine's state in that window), so the ratio is usually far tighter than the ratio of two
  independent means; the log keeps the interval of a ratio and of its inverse consistent.

With one repetition there is no interval (``low``/``high`` None): such a figure is a screening
value, never a result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

CONFIDENCE = 0.95


def t_quantile(degrees_of_freedom: int, confidence: float = CONFIDENCE) -> float:
    """Two-sided Student-t critical value, e.g. 4.303 for 2 degrees of freedom at 95 %."""
    from scipy.stats import t  # scipy is a dependency; imported here to keep `import autotune` light

    return float(t.ppf(0.5 + confidence / 2, degrees_of_freedom))


@dataclass(frozen=True)
class Estimate:
    """A measured figure: ``value`` (mean, or geometric mean for ratios), its ``confidence``
    interval [``low``, ``high``] (None with fewer than 2 repetitions) and ``n`` repetitions."""

    value: float
    low: float | None = None
    high: float | None = None
    n: int = 1
    confidence: float = CONFIDENCE

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def relative_half_width(self) -> float | None:
        """Half the interval's width over the value (0.05 = ±5 %); None without an interval."""
        if not self.has_interval or self.value == 0:
            return None
        return (self.high - self.low) / 2 / abs(self.value)

    def excludes(self, reference: float) -> bool:
        """True when the whole interval lies on one side of ``reference`` (it differs at 95 %)."""
        return self.has_interval and (self.low > reference or self.high < reference)

    def scaled(self, factor: float) -> Estimate:
        """The estimate of ``factor`` times this figure (factor > 0)."""
        return Estimate(self.value * factor, _times(self.low, factor), _times(self.high, factor), self.n, self.confidence)

    def inverse(self) -> Estimate:
        """The estimate of 1 / this figure (for a ratio: the other way round)."""
        return Estimate(1 / self.value, _inverse(self.high), _inverse(self.low), self.n, self.confidence)

    def describe(self, digits: int = 1, unit: str = "") -> str:
        """``"412.3 ± 2.1 % tokens/s (n=5)"`` style text; ``"(n=1, no interval)"`` for one run."""
        text = f"{self.value:.{digits}f}{unit}"
        width = self.relative_half_width
        if width is None:
            return f"{text} (n={self.n}, no interval)"
        return f"{text} ±{width:.1%} (n={self.n})"

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n, "confidence": self.confidence}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Estimate:
        return cls(float(data["value"]), data.get("low"), data.get("high"), int(data.get("n", 1)),
                   float(data.get("confidence", CONFIDENCE)))

    @classmethod
    def single(cls, value: float) -> Estimate:
        """One repetition: the value, no interval (how rows stored before intervals read)."""
        return cls(float(value), None, None, 1)


def _times(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _inverse(value: float | None) -> float | None:
    return None if value is None or value == 0 else 1 / value


def mean_interval(samples: Sequence[float], confidence: float = CONFIDENCE) -> Estimate:
    """Mean of ``samples`` with its Student-t interval (no interval for a single sample)."""
    values = [float(v) for v in samples]
    if not values:
        raise ValueError("no samples to estimate from")
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return Estimate(mean, None, None, 1, confidence)
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = t_quantile(n - 1, confidence) * math.sqrt(variance / n)
    return Estimate(mean, mean - half, mean + half, n, confidence)


def paired_ratio_interval(
    numerators: Sequence[float], denominators: Sequence[float], confidence: float = CONFIDENCE
) -> Estimate:
    """Ratio of two figures measured in the same rounds: geometric mean of a_i / b_i, with the
    t interval of mean(log(a_i / b_i)) exponentiated (see the module doc)."""
    if len(numerators) != len(denominators):
        raise ValueError(f"paired samples differ in length: {len(numerators)} and {len(denominators)}")
    if any(v <= 0 for v in (*numerators, *denominators)):
        raise ValueError("ratios need positive figures")
    logs = mean_interval([math.log(a / b) for a, b in zip(numerators, denominators)], confidence)
    return Estimate(
        math.exp(logs.value),
        None if logs.low is None else math.exp(logs.low),
        None if logs.high is None else math.exp(logs.high),
        logs.n,
        confidence,
    )


def paired_by_round(
    rounds_a: Sequence[int], samples_a: Sequence[float], rounds_b: Sequence[int], samples_b: Sequence[float]
) -> tuple[list[float], list[float]]:
    """The samples of two configurations from the rounds both kept, aligned round by round."""
    b_by_round = dict(zip(rounds_b, samples_b))
    pairs = [(value, b_by_round[r]) for r, value in zip(rounds_a, samples_a) if r in b_by_round]
    return [p[0] for p in pairs], [p[1] for p in pairs]
