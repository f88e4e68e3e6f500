"""The performance model: prediction from curves and costs, corrections learned from
measurements, and the uncertainty it reports."""

from __future__ import annotations

import math

import pytest

from autotune.perfmodel.acceptance import AcceptanceCurve, PositionCounts
from autotune.perfmodel.cost import CostPoint, CostProfile
from autotune.perfmodel.model import PRIOR_SIGMA, PerformanceModel


def cost() -> CostProfile:
    points = []
    for b in (1, 4):
        points.append(CostPoint("none", None, 0, b, 0.0, 0.010, 0.0, b * 8))
        for depth in (1, 2):
            points.append(CostPoint("mtp", None, depth, b, 0.002 * depth, 0.011, 0.0, b * 8))
    return CostProfile(points)


def curves() -> dict:
    return {("mtp", None): AcceptanceCurve("mtp", (PositionCounts(1000, 800, 1000), PositionCounts(1000, 500, 1000)))}


def test_the_baseline_prediction_is_tokens_over_steps() -> None:
    model = PerformanceModel(cost(), {}, [8], [11])
    prediction = model.predict("none", None, 0, 1)
    # 10 tokens after the first, one per 10 ms step.
    assert prediction.tokens_per_s == pytest.approx(11 / 0.100)
    assert prediction.omega == 1.0
    assert prediction.sigma == pytest.approx(math.sqrt(PRIOR_SIGMA ** 2 + cost().spread ** 2))
    assert prediction.low < prediction.tokens_per_s < prediction.high
    assert prediction.tpot_ms_p50 == pytest.approx(10.0)


def test_speculation_uses_omega_and_its_own_step_cost() -> None:
    model = PerformanceModel(cost(), curves(), [8], [14])
    prediction = model.predict("mtp", None, 2, 1)
    assert prediction.omega == pytest.approx(2.3)
    steps = math.ceil(13 / 2.3)
    assert prediction.tokens_per_s == pytest.approx(14 / (steps * 0.015))
    assert prediction.sigmas["acceptance"] > 0


def test_missing_curves_or_depths_are_not_predicted() -> None:
    model = PerformanceModel(cost(), curves(), [8], [14])
    assert model.predict("mtp", None, 3, 1) is None  # the curve stops at depth 2
    assert model.predict("ngram", None, 1, 1) is None  # neither a curve nor timings
    assert not model.can_predict("draft", "builtin", 1)


def test_measurements_correct_the_model_shrunk_towards_one() -> None:
    model = PerformanceModel(cost(), curves(), [8], [14])
    raw = model.predict("none", None, 0, 1).tokens_per_s
    model.calibrate([("none", None, 0, 1, raw * 1.2), ("none", None, 0, 4, None)])
    # One measurement 20 % above, each level shrunk by one pseudo-measurement at 1 (in logs): the
    # study-wide level takes half of it, the method's level half of the rest.
    assert model.correction_all == pytest.approx(1.2 ** 0.5)
    assert model.predict("none", None, 0, 1).tokens_per_s == pytest.approx(raw * 1.2 ** 0.75, rel=1e-6)


def test_residuals_widen_the_interval() -> None:
    model = PerformanceModel(cost(), curves(), [8], [14])
    raw = model.predict("none", None, 0, 1).tokens_per_s
    model.calibrate([("none", None, 0, 1, raw * 1.5), ("none", None, 0, 1, raw / 1.5)] * 3)
    assert model.sigma_model > PRIOR_SIGMA
    described = model.describe()
    assert described["sigma_model"] == model.sigma_model
    assert described["omega"]["mtp"] == pytest.approx([1.8, 2.3])


def test_prediction_dicts_carry_intervals_for_tokens_and_latency() -> None:
    prediction = PerformanceModel(cost(), curves(), [8], [14]).predict("mtp", None, 1, 4)
    data = prediction.to_dict()
    assert set(data["tokens_per_s"]) == {"value", "low", "high"}
    assert data["tpot_ms_p50"]["low"] < data["tpot_ms_p50"]["value"] < data["tpot_ms_p50"]["high"]
    assert data["source"] == "timed" and data["omega"] == pytest.approx(1.8)
