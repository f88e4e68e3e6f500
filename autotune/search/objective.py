"""What the search optimises: throughput (optionally under latency SLOs), or the Pareto front of
throughput versus TPOT.

SLOs become Optuna constraints (``trial.set_constraint``, Optuna >= 5): one value per SLO, the
relative excess ``(measured - limit) / limit``, feasible when <= 0. Relative values keep TPOT and
TTFT on one scale, which matters because constrained TPE ranks infeasible trials by the sum of
their positive constraint values.

Figures are read by attribute name (``tokens_per_s``, ``tpot_ms_p90``, ...), so a
:class:`~autotune.engines.base.Measurement` and a stored trial row both work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from autotune.errors import ConfigurationError

OBJECTIVES = ("throughput", "pareto")
PERCENTILES = (50, 90, 99)
DEFAULT_PERCENTILE = 90


@dataclass(frozen=True)
class Slo:
    """Latency limits at one percentile; None means no limit."""

    tpot_ms: float | None = None
    ttft_ms: float | None = None
    percentile: int = DEFAULT_PERCENTILE

    def validate(self) -> None:
        for name, limit in (("tpot_ms", self.tpot_ms), ("ttft_ms", self.ttft_ms)):
            if limit is not None and not (_is_number(limit) and math.isfinite(limit) and limit > 0):
                raise ConfigurationError(f"SLO {name} must be a number of milliseconds > 0, got {limit!r}")
        if self.percentile not in PERCENTILES:
            raise ConfigurationError(
                f"SLO percentile must be one of {', '.join(map(str, PERCENTILES))}, got {self.percentile!r}"
            )

    @property
    def limits(self) -> dict[str, float]:
        """The active limits by figure name, e.g. ``{"tpot_ms_p90": 20.0}``."""
        named = {f"tpot_ms_p{self.percentile}": self.tpot_ms, f"ttft_ms_p{self.percentile}": self.ttft_ms}
        return {name: limit for name, limit in named.items() if limit is not None}

    def excess(self, figures: Any) -> dict[str, float]:
        """(measured - limit) / limit per active limit; a figure that was not measured counts as met."""
        result = {}
        for name, limit in self.limits.items():
            measured = getattr(figures, name)
            result[name] = 0.0 if measured is None else (measured - limit) / limit
        return result

    def is_met(self, figures: Any) -> bool:
        return all(value <= 0 for value in self.excess(figures).values())

    def violation(self, figures: Any) -> float:
        """Total relative excess over the limits (0 when every limit is met): 'how close' a miss is."""
        return sum(max(0.0, value) for value in self.excess(figures).values())

    def to_dict(self) -> dict[str, Any]:
        return {"tpot_ms": self.tpot_ms, "ttft_ms": self.ttft_ms, "percentile": self.percentile}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Slo:
        return cls(data.get("tpot_ms"), data.get("ttft_ms"), data.get("percentile", DEFAULT_PERCENTILE))


@dataclass(frozen=True)
class Objective:
    """``throughput``: maximise output tokens/s. ``pareto``: maximise tokens/s and minimise TPOT p50."""

    kind: str = "throughput"
    slo: Slo = field(default_factory=Slo)

    def validate(self) -> None:
        if self.kind not in OBJECTIVES:
            raise ConfigurationError(f"unknown objective {self.kind!r}; choose one of {', '.join(OBJECTIVES)}")
        self.slo.validate()

    @property
    def directions(self) -> list[str]:
        return ["maximize"] if self.kind == "throughput" else ["maximize", "minimize"]

    def values(self, figures: Any) -> list[float]:
        """The Optuna objective values of a measurement, in the order of :attr:`directions`."""
        if self.kind == "throughput":
            return [figures.tokens_per_s]
        if figures.tpot_ms_p50 is None:
            raise ValueError("no TPOT was measured (every request produced a single token)")
        return [figures.tokens_per_s, figures.tpot_ms_p50]

    def constraints(self, figures: Any) -> dict[str, float]:
        """Optuna constraint values (feasible when <= 0), one per SLO limit."""
        return self.slo.excess(figures)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
