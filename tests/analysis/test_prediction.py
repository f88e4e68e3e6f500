"""Predicted against measured (:mod:`autotune.analysis.prediction`): the error of a prediction is
predicted / measured - 1, and the study's figure is its median absolute value over the complete
screening rows that have both; rows without a prediction, failed rows and confirmation rows do not
count."""

from __future__ import annotations

import math

import pytest

from autotune.analysis.prediction import (
    Predicted, checked_rows, measured, predicted, prediction_error, relative_error, within_interval,
)
from autotune.store.results import TrialRow


def guess(value: float, low: float | None = None, high: float | None = None, **more) -> dict:
    """A stored prediction as the tuner writes it (Prediction.to_dict())."""
    return {"tokens_per_s": {"value": value, "low": low, "high": high}, "omega": 2.5, "sigma": 0.12,
            "sigmas": {"acceptance": 0.01, "cost": 0.03, "model": 0.11}, "correction": 1.0, "source": "timed", **more}


def row(number: int, tokens: float | None, prediction: dict | None, *, state: str = "complete",
        phase: str = "screening") -> TrialRow:
    return TrialRow(trial_number=number, method="mtp", draft=None, depth=2, concurrency=4, state=state,
                    reason=None if state == "complete" else "out of memory", tokens_per_s=tokens, phase=phase,
                    prediction=prediction,
                    extra={"confirmation": {"run": 1, "concurrency": 4}} if phase == "confirmation" else {})


def test_relative_error_is_predicted_over_measured_minus_one() -> None:
    assert relative_error(row(0, 1000.0, guess(1078.0))) == pytest.approx(0.078)
    assert relative_error(row(1, 1000.0, guess(900.0, 700.0, 1150.0))) == pytest.approx(-0.1)
    assert relative_error(row(2, 1000.0, None)) is None  # measured before the model could predict
    assert relative_error(row(3, None, guess(900.0), state="failed")) is None  # nothing measured


def test_predicted_reads_the_stored_dict() -> None:
    assert predicted(row(0, 1.0, guess(1790.0, 1400.0, 2290.0))) == Predicted(1790.0, 1400.0, 2290.0)
    assert predicted(row(0, 1.0, {"tokens_per_s": 512.0})) == Predicted(512.0)  # a bare value: no interval
    assert predicted(row(0, 1.0, {"omega": 2.0, "source": "timed"})) is None  # no tokens/s predicted
    assert predicted(row(0, 1.0, guess(float("nan")))) is None
    assert predicted(row(0, 1.0, guess(0.0))) is None
    assert predicted(row(0, 1.0, None)) is None
    assert predicted(row(0, 1.0, guess(4.1, 3.3, 5.2)), "tpot_ms_p50") is None
    latency = {"tpot_ms_p50": {"value": 4.1, "low": 3.3, "high": 5.2}}
    assert predicted(row(0, 1.0, latency), "tpot_ms_p50") == Predicted(4.1, 3.3, 5.2)
    assert Predicted(10.0, 8.0, 12.0).contains(12.0) and not Predicted(10.0, 8.0, 12.0).contains(12.5)
    assert not Predicted(10.0).contains(10.0)  # no interval: nothing is inside
    assert measured(row(0, 0.0, None)) is None and measured(row(0, 5.0, None)) == 5.0


def test_prediction_error_is_the_median_over_complete_screening_rows() -> None:
    rows = [
        row(0, 1000.0, None),                                           # before the model could predict
        row(1, 1000.0, guess(1078.0, 900.0, 1300.0)),                   # +7.8 %
        row(2, 500.0, guess(450.0, 400.0, 520.0)),                      # -10 %
        row(3, 200.0, guess(260.0, 210.0, 320.0)),                      # +30 %, measured outside
        row(4, 800.0, guess(820.0)),                                    # +2.5 %, no interval
        row(5, None, guess(5000.0, 4000.0, 6000.0), state="failed"),    # predicted, but nothing measured
        row(6, None, guess(5000.0), state="infeasible"),
        row(0, 100.0, guess(1000.0, 900.0, 1100.0), phase="confirmation"),  # +900 %: not a screening row
        row(1, 1000.0, None, phase="confirmation"),
    ]
    assert [r.trial_number for r in checked_rows(rows)] == [1, 2, 3, 4]
    error, n = prediction_error(rows)
    assert n == 4
    assert error == pytest.approx((0.078 + 0.1) / 2)  # the median of 0.025, 0.078, 0.1, 0.3
    assert within_interval(rows) == (2, 3)  # trial 4 has no interval; trial 3 measured below its low


def test_odd_count_median_and_negative_errors_count_by_size() -> None:
    rows = [row(0, 100.0, guess(50.0)), row(1, 100.0, guess(120.0)), row(2, 100.0, guess(99.0))]
    assert prediction_error(rows) == (pytest.approx(0.2), 3)  # |-50 %|, |+20 %|, |-1 %|: the median is 20 %


def test_no_rows_to_check() -> None:
    assert prediction_error([]) == (None, 0)
    assert within_interval([]) == (0, 0)
    only_unpredicted = [row(0, 100.0, None), row(1, None, guess(80.0), state="failed"),
                        row(2, 100.0, guess(80.0), phase="confirmation")]
    assert prediction_error(only_unpredicted) == (None, 0)
    assert prediction_error(iter([row(0, 100.0, guess(100.0))])) == (0.0, 1)  # any iterable; exact: 0


def test_works_on_exported_measurements() -> None:
    from autotune.profiles.data import trial_from_document

    rows = [trial_from_document({"trial_number": 0, "method": "none", "depth": 0, "concurrency": 1, "state": "complete",
                                 "draft": None, "tokens_per_s": 400.0, "prediction": guess(440.0, 350.0, 560.0)})]
    error, n = prediction_error(rows)
    assert n == 1 and math.isclose(error, 0.1)
