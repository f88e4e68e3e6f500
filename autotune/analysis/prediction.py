"""Predicted against measured: how close the performance model's prediction, made *before* a trial
ran, came to what the trial then measured.

Each measured trial stores the model's prediction next to its figures
(:attr:`~autotune.store.results.TrialFigures.prediction`: ``None``, or a dict such as
``{"tokens_per_s": {"value": 1790.0, "low": 1400.0, "high": 2290.0}, "sigma": 0.12, ...,
"source": "timed"}`` with the 95 % interval). Only screening trials are checked: they are one pass
each, measured as the model predicted them; confirmation rows re-measure finalists and carry no
prediction of their own, and a failed or infeasible trial measured nothing.

The error of one prediction is ``predicted / measured - 1`` (+0.078: the model expected 7.8 % more
than was measured; -0.1: 10 % less). Pure functions over rows (stored trials, an exported
profile's measurements); used by ``autotune trials``, the report, the tuning summary and the
benchmark.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

Row = TypeVar("Row")  # a TrialFigures: state, phase, tokens_per_s, prediction

FIGURE = "tokens_per_s"


@dataclass(frozen=True)
class Predicted:
    """One predicted figure: its central value and 95 % interval (None where none was stored)."""

    value: float
    low: float | None = None
    high: float | None = None

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def contains(self, measured: float) -> bool:
        """Whether ``measured`` lies inside the interval (False without one)."""
        return self.has_interval and self.low <= measured <= self.high


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def predicted(row: Any, figure: str = FIGURE) -> Predicted | None:
    """What the model predicted of ``figure`` for ``row`` before it ran; None when the row has no
    prediction, or none of that figure (or a value that is not a positive number)."""
    prediction = getattr(row, "prediction", None)
    if not isinstance(prediction, dict):
        return None
    entry = prediction.get(figure)
    if isinstance(entry, dict):
        value, low, high = (_number(entry.get(k)) for k in ("value", "low", "high"))
    else:  # a bare number: a central value without interval
        value, low, high = _number(entry), None, None
    if value is None or value <= 0:
        return None
    return Predicted(value, low, high)


def measured(row: Any, figure: str = FIGURE) -> float | None:
    """The figure the row measured: None unless it ran to the end and measured a positive value."""
    if getattr(row, "state", None) != "complete":
        return None
    value = _number(getattr(row, figure, None))
    return value if value is not None and value > 0 else None


def relative_error(row: Any, figure: str = FIGURE) -> float | None:
    """``predicted / measured - 1`` for ``row``, where both exist (any phase); else None."""
    guess, value = predicted(row, figure), measured(row, figure)
    if guess is None or value is None:
        return None
    return guess.value / value - 1


def checked_rows(rows: Iterable[Row], figure: str = FIGURE) -> list[Row]:
    """The complete screening rows that have both a prediction and a measurement of ``figure``."""
    return [row for row in rows
            if getattr(row, "phase", "screening") != "confirmation" and relative_error(row, figure) is not None]


def prediction_error(rows: Iterable[Row], figure: str = FIGURE) -> tuple[float | None, int]:
    """The median absolute relative error ``|predicted / measured - 1|`` of ``figure`` (tokens/s)
    over the complete screening rows of ``rows`` that have both a prediction and a measurement,
    and how many such rows there are: ``(0.078, 12)``; ``(None, 0)`` when there are none.

    Rows without a prediction, failed or infeasible rows and confirmation rows are left out."""
    errors = [abs(relative_error(row, figure)) for row in checked_rows(rows, figure)]
    if not errors:
        return None, 0
    return statistics.median(errors), len(errors)


def within_interval(rows: Iterable[Row], figure: str = FIGURE) -> tuple[int, int]:
    """Of the rows :func:`prediction_error` counts, how many measured inside the predicted 95 %
    interval, and how many have an interval at all: ``(10, 12)`` (about 95 % expected)."""
    inside = with_interval = 0
    for row in checked_rows(rows, figure):
        guess = predicted(row, figure)
        if guess.has_interval:
            with_interval += 1
            inside += guess.contains(measured(row, figure))
    return inside, with_interval
