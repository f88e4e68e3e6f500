"""The performance model: prediction from curves and costs, corrections learned from
measurements, and the uncertainty it reports."""

from __future__ import annotations

import math

import pytest

from autotune.perfmodel.acceptance import AcceptanceCurve, PositionCounts
from autotune.perfmodel.cost import CostPoint, CostProfile
from autotune.perfmodel.model import PRIOR_SIGMA, PerformanceModel, corrections, loo_errors, shrunk_mean


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
    # 10 tokens after the first, one per 10 ms step (no prefill cost): the stream's four requests one
    # after the other, the window from the first finish (0.1 s) to the last: the last three requests,
    # but the second's first token, which arrives at the window's start with no prefill: 32 in 0.3 s.
    assert prediction.tokens_per_s == pytest.approx(32 / 0.300)
    assert prediction.omega == 1.0
    assert prediction.sigma == pytest.approx(math.sqrt(PRIOR_SIGMA ** 2 + cost().spread ** 2))
    assert prediction.low < prediction.tokens_per_s < prediction.high
    assert prediction.tpot_ms_p50 == pytest.approx(10.0)


def test_speculation_uses_omega_and_its_own_step_cost() -> None:
    model = PerformanceModel(cost(), curves(), [8], [14])
    prediction = model.predict("mtp", None, 2, 1)
    assert prediction.omega == pytest.approx(2.3)
    steps = math.ceil(13 / 2.3)
    # The stream's four requests at concurrency 1, the window from the first finish to the last: the
    # last three requests, less the second's first token (no prefill cost: it arrives at the start).
    assert prediction.tokens_per_s == pytest.approx((13 + 2 * 14) / (3 * steps * 0.015))
    assert prediction.sigmas["acceptance"] > 0


def test_missing_curves_or_depths_are_not_predicted() -> None:
    model = PerformanceModel(cost(), curves(), [8], [14])
    assert model.predict("mtp", None, 3, 1) is None  # the curve stops at depth 2
    assert model.predict("ngram", None, 1, 1) is None  # neither a curve nor timings
    assert not model.can_predict("draft", "builtin", 1)


def test_no_correction_from_zero_or_one_residual() -> None:
    assert shrunk_mean([]) == 0.0
    # One +41 % pass (the trial 0) cannot tell a shift from noise.
    assert shrunk_mean([math.log(1.41)]) == 0.0
    model = PerformanceModel(cost(), curves(), [8], [14])
    raw = model.predict("none", None, 0, 1).tokens_per_s
    model.calibrate([("none", None, 0, 1, raw * 1.41), ("none", None, 0, 4, None)])
    assert model.correction_all == 1.0 and model.corrections == {("none", None): 1.0}
    assert model.predict("none", None, 0, 1).tokens_per_s == pytest.approx(raw)


def test_two_or_more_residuals_are_shrunk_by_their_number_and_spread() -> None:
    # shrunk = mean x max(0, 1 - s^2 / (n mean^2)).
    residuals = [0.30, 0.10]
    mean, variance = 0.20, 0.02
    assert shrunk_mean(residuals) == pytest.approx(mean * (1 - variance / (2 * mean ** 2)))
    # A shift within its standard error is dropped; a consistent one is kept almost whole.
    assert shrunk_mean([0.34, 0.0]) == 0.0
    assert shrunk_mean([0.20, 0.21, 0.19, 0.20]) == pytest.approx(0.20, rel=0.01)
    # More residuals of the same spread shrink less.
    assert shrunk_mean([0.3, 0.1] * 4) > shrunk_mean([0.3, 0.1])


def test_the_method_level_corrects_what_is_left_after_the_study_wide_level() -> None:
    logs = [(("none", None), None, 0.10), (("none", None), None, 0.12), (("mtp", None), None, 0.40),
            (("mtp", None), None, 0.42)]
    shift, groups, cells = corrections(logs)
    assert shift == pytest.approx(shrunk_mean([r for _, _, r in logs]))
    assert groups[("mtp", None)] == pytest.approx(shrunk_mean([0.40 - shift, 0.42 - shift]))
    assert groups[("none", None)] < 0 < groups[("mtp", None)]
    assert cells == {}  # no concurrency levels: no cell level


def test_the_cell_level_corrects_a_bias_that_depends_on_the_concurrency() -> None:
    """Drafts predicted right at batch 8 and ~10 % high at batch 1 (the guided benchmark): the
    method level sees a scattered -5 % and corrects little; the cells correct each concurrency."""
    draft = ("draft", "builtin")
    logs = [(draft, 8, 0.01), (draft, 8, -0.01), (draft, 1, -0.11), (draft, 1, -0.095),
            (("none", None), 1, 0.0), (("none", None), 8, 0.01)]
    fitted = corrections(logs)
    assert fitted.of(draft, 1) == pytest.approx(-0.10, abs=0.015)
    assert fitted.of(draft, 8) == pytest.approx(0.0, abs=0.015)
    assert fitted.of(draft, 4) == pytest.approx(fitted.shift + fitted.groups[draft])  # no cell there yet
    # A single residual at a concurrency moves nothing at that level.
    assert corrections([*logs, (draft, 2, -0.3)]).cells[(draft, 2)] == 0.0
    # The model applies it: mtp measured 10 % below raw at batch 1 (twice), as raw at batch 4 (twice).
    model = PerformanceModel(cost(), curves(), [8], [14])
    raw = {(d, b): model.predict("mtp", None, d, b).tokens_per_s for d in (1, 2) for b in (1, 4)}
    model.calibrate([("mtp", None, d, 1, raw[(d, 1)] * 0.9) for d in (1, 2)]
                    + [("mtp", None, d, 4, raw[(d, 4)]) for d in (1, 2)])
    assert model.predict("mtp", None, 2, 1).tokens_per_s < raw[(2, 1)] * 0.95
    assert model.predict("mtp", None, 2, 4).tokens_per_s == pytest.approx(raw[(2, 4)], rel=0.05)
    assert "mtp c1" in model.describe()["cell_corrections"]


def test_model_uncertainty_comes_from_leave_one_out_errors() -> None:
    logs = [(("none", None), None, r) for r in (0.10, 0.20, 0.30)]
    # Point 0 left out: the others' shrunk mean is 0.25 x (1 - 0.005 / (2 x 0.0625)) = 0.24.
    assert loo_errors(logs)[0] == pytest.approx(0.10 - 0.24)
    model = PerformanceModel(cost(), curves(), [8], [14])
    raw = model.predict("none", None, 0, 1).tokens_per_s
    model.calibrate([("none", None, 0, 1, raw * math.exp(r)) for _, _, r in logs])
    # In-sample residuals after the correction would be smaller than these.
    in_sample = [r - math.log(model.correction_all * model.corrections[("none", None)]
                              * model.cell_corrections.get((("none", None), 1), 1.0)) for _, _, r in logs]
    assert sum(e * e for e in model.residuals) > sum(e * e for e in in_sample)
    assert model.residuals == pytest.approx(loo_errors(logs))


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
