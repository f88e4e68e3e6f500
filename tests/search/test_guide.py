"""The model-guided search: what it measures first, what it rules out, when it stops; and the
study it drives, end to end (real Optuna study, real engine, tiny random models)."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from types import SimpleNamespace

import optuna
import pytest

from autotune.engines.worker import EngineWorker, WorkerFailure
from autotune.errors import ConfigurationError, EngineError
from autotune.perfmodel.acceptance import AcceptanceCurve, PositionCounts
from autotune.perfmodel.cost import CostPoint, CostProfile
from autotune.perfmodel.model import PerformanceModel
from autotune.search import guide, tune
from autotune.search.beyond import extended_curve, extended_model
from autotune.search.objective import Slo
from autotune.search.options import TuneOptions
from autotune.search.space import OPTUNA_CONCURRENCY_KEY, Candidate, SearchSpace
from autotune.store import open_database, performance, results

SPACE = SearchSpace(("none", "mtp", "ngram"), (), 2, (1, 4))


def cost(slow_mtp_at_4: bool = True) -> CostProfile:
    points = []
    for b in (1, 4):
        points.append(CostPoint("none", None, 0, b, 0.0, 0.010, 0.0, b * 8))
        for depth in (1, 2):
            # MTP at depth 2 is slow at batch 4 (compute-bound verify), fast at batch 1.
            slow = 0.02 * depth if b == 4 and slow_mtp_at_4 else 0
            points.append(CostPoint("mtp", None, depth, b, 0.001, 0.010 + slow, 0.0, b * 8))
            points.append(CostPoint("ngram", None, depth, b, 0.002, 0.010, 0.0, b * 8))
    return CostProfile(points)


def model(curves: dict | None = None, slow_mtp_at_4: bool = True) -> PerformanceModel:
    default = {("mtp", None): AcceptanceCurve("mtp", (PositionCounts(1000, 900, 1000), PositionCounts(1000, 800, 1000))),
               ("ngram", None): AcceptanceCurve("ngram", (PositionCounts(1000, 100, 300), PositionCounts(1000, 50, 300)))}
    return PerformanceModel(cost(slow_mtp_at_4), default if curves is None else curves, [8] * 4, [40] * 4)


def row(label: Candidate, tokens_per_s: float, state: str = "complete") -> SimpleNamespace:
    return SimpleNamespace(method=label.method, draft=label.draft, depth=label.depth, concurrency=label.concurrency,
                           state=state, phase="screening", tokens_per_s=tokens_per_s, tpot_ms_p90=None)


def taken(*candidates: Candidate) -> list[dict]:
    return [SearchSpace.params(c) for c in candidates]


def anything(_candidate: Candidate) -> bool:
    return True


def test_calibration_runs_come_first_at_the_maximum_depth_and_the_largest_batch_that_fits() -> None:
    pick = guide.next_pick(SPACE, guide.Guidance(model({}), []), taken(), anything, Slo())
    assert pick.candidate == Candidate("mtp", 2, 4) and "acceptance curve" in pick.reason
    small = guide.next_pick(SPACE, guide.Guidance(model({}), []), taken(), lambda c: c.concurrency == 1, Slo())
    assert small.candidate == Candidate("mtp", 2, 1)  # batch 4 does not fit
    after = guide.next_pick(SPACE, guide.Guidance(model({}), []), taken(Candidate("mtp", 2, 4)), anything, Slo())
    assert after.candidate == Candidate("ngram", 2, 4)


def test_the_pick_is_the_largest_optimistic_gain_and_clear_losers_are_never_measured() -> None:
    m = model()
    baseline = {b: m.predict("none", None, 0, b).tokens_per_s for b in (1, 4)}
    rows = [row(Candidate("none", 0, b), baseline[b]) for b in (1, 4)]
    done = taken(Candidate("none", 0, 1), Candidate("none", 0, 4))
    pick = guide.next_pick(SPACE, guide.Guidance(m, rows), done, anything, Slo())
    assert pick.candidate == Candidate("mtp", 2, 1) and pick.prediction is not None
    opened = []
    while pick is not None:
        opened.append(pick.candidate)
        done.append(SearchSpace.params(pick.candidate))
        pick = guide.next_pick(SPACE, guide.Guidance(m, rows), done, anything, Slo())
    # MTP at batch 4 pays a slow verify: it cannot beat the baseline. n-gram@2 is predicted 4 % below
    # it with a 10 % sigma: at z = 1 that is a 18 % chance of beating it by the tie margin, so it
    # stays open; n-gram@1 (10 % below, margin -1.5 sigma) is closed.
    assert opened == [Candidate("mtp", 2, 1), Candidate("mtp", 1, 1), Candidate("ngram", 2, 1), Candidate("ngram", 2, 4)]


def test_a_measured_incumbent_closes_the_points_that_cannot_beat_it_by_the_tie_margin() -> None:
    m = model()
    best = m.predict("mtp", None, 2, 1).tokens_per_s
    rows = [row(Candidate("mtp", 2, 1), best * 1.3)]  # measured well above every prediction at b1
    pick = guide.next_pick(SPACE, guide.Guidance(m, rows), taken(Candidate("mtp", 2, 1)), lambda c: c.concurrency == 1,
                           Slo())
    assert pick is None


def test_a_baseline_is_screened_only_where_it_could_lead_its_concurrency() -> None:
    """No baseline is planned: MTP measured where predicted (2.4x the baseline) closes none c1; MTP
    measured at 0.7x the baseline's prediction leaves it open, and it is the next pick."""
    m = model()
    mtp_and_none_at_1 = lambda c: c.concurrency == 1 and c.method in ("none", "mtp")  # noqa: E731
    first = guide.next_pick(SPACE, guide.Guidance(m, []), taken(Candidate("mtp", 2, 4)), mtp_and_none_at_1, Slo())
    assert first.candidate == Candidate("mtp", 2, 1)  # the guide's own order, not a planned baseline
    fast = [row(Candidate("mtp", 2, 1), m.predict("mtp", None, 2, 1).tokens_per_s)]
    assert guide.next_pick(SPACE, guide.Guidance(m, fast), taken(Candidate("mtp", 2, 1)), mtp_and_none_at_1,
                           Slo()) is None
    slow = [row(Candidate("mtp", 2, 1), 0.7 * m.predict("none", None, 0, 1).tokens_per_s)]
    done = taken(Candidate("mtp", 2, 1), Candidate("mtp", 1, 1))
    pick = guide.next_pick(SPACE, guide.Guidance(m, slow), done, mtp_and_none_at_1, Slo())
    assert pick.candidate == Candidate("none", 0, 1)


def test_a_pass_is_shrunk_toward_its_prediction_by_precision_weights() -> None:
    # log value = w log m + (1 - w) log p, w = sp^2 / (sp^2 + s^2); sigma^2 = sp^2 s^2 / (sp^2 + s^2).
    value, sigma = guide.shrunk_pass(1300.0, 1000.0, 0.1, 0.1)
    assert value == pytest.approx((1300.0 * 1000.0) ** 0.5) and sigma == pytest.approx(0.1 / 2 ** 0.5)
    value, _ = guide.shrunk_pass(1300.0, 1000.0, 0.3, 0.1)
    assert value == pytest.approx(math.exp(0.9 * math.log(1300) + 0.1 * math.log(1000)))
    assert guide.shrunk_pass(1300.0, None, None, 0.1) == (1300.0, 0.1)  # nothing to shrink toward


def test_the_incumbent_is_the_best_shrunk_pass_toward_its_stored_prediction() -> None:
    lucky = SimpleNamespace(**vars(row(Candidate("mtp", 2, 1), 1300.0)),
                            prediction={"tokens_per_s": {"value": 1000.0}, "sigma": 0.1})
    steady = SimpleNamespace(**vars(row(Candidate("mtp", 1, 1), 1200.0)),
                             prediction={"tokens_per_s": {"value": 1200.0}, "sigma": 0.1})
    m = model()
    with_noise = PerformanceModel(CostProfile(cost().points, spread=0.1), m.curves, m.prompts, m.lengths)
    best = guide.incumbents([lucky, steady], Slo(), with_noise)[1]
    # The lucky pass (30 % above its prediction) shrinks to 1140, below the steady one's 1200.
    assert best.tokens_per_s == pytest.approx(1200.0) and best.sigma == pytest.approx(0.1 / 2 ** 0.5)


def test_the_true_value_sigma_takes_the_pass_noise_out_once() -> None:
    """Var(pass - prediction) = Var(true - prediction) + sigma_pass^2: the cost term (the pass
    noise) goes, and the model term loses the pass noise, to at most three quarters of it."""
    sigmas = {"acceptance": 0.03, "cost": 0.05, "model": 0.10}
    total = math.sqrt(sum(v * v for v in sigmas.values()))
    assert guide.true_sigma(sigmas, total, 0.05) == pytest.approx(math.sqrt(0.03 ** 2 + 0.10 ** 2 - 0.05 ** 2))
    assert guide.true_sigma(sigmas, total, 0.09) == pytest.approx(math.sqrt(0.03 ** 2 + 0.10 ** 2 / 4))
    assert guide.true_sigma(sigmas, total, 0.05) < total
    assert guide.true_sigma(None, 0.12, 0.05) == 0.12  # a stored prediction without components


@pytest.mark.parametrize("sigma_pass", [0.0, 0.04])
def test_pruning_compares_with_the_combined_sigma_at_z_1(sigma_pass) -> None:
    prediction = model().predict("mtp", None, 2, 1)
    value, sigma = prediction.tokens_per_s, guide.true_sigma(prediction.sigmas, prediction.sigma, sigma_pass)
    candidate = Candidate("mtp", 2, 1)
    # Just over one combined sigma below the bar: closed; just under: open.
    for sigma_incumbent in (0.0, 0.2):
        combined = math.hypot(sigma, sigma_incumbent)
        bar = value * math.exp(combined * 0.99)
        incumbent = guide.Incumbent(bar / (1 + guide.TIE_MARGIN), sigma_incumbent)
        assessed = guide._assess(candidate, prediction, incumbent, Slo(), guide.GUIDE_Z, sigma_pass)
        assert assessed.is_open(1.0) and assessed.margin == pytest.approx(-0.99)
        incumbent = guide.Incumbent(value * math.exp(combined * 1.01) / (1 + guide.TIE_MARGIN), sigma_incumbent)
        assert not guide._assess(candidate, prediction, incumbent, Slo(), guide.GUIDE_Z, sigma_pass).is_open(1.0)


def test_the_summary_says_what_was_ruled_out_and_how_likely_the_closest_could_win() -> None:
    m = model()
    rows = [row(Candidate("none", 0, b), m.predict("none", None, 0, b).tokens_per_s) for b in (1, 4)]
    rows += [row(Candidate("mtp", d, 1), m.predict("mtp", None, d, 1).tokens_per_s) for d in (1, 2)]
    rows += [row(Candidate("ngram", 2, b), m.predict("ngram", None, 2, b).tokens_per_s) for b in (1, 4)]
    out = guide.ruled_out(SPACE, guide.Guidance(m, rows), anything, Slo())
    # Left: mtp@1, mtp@2 and ngram@1 at batch 4, ngram@1 at batch 1; ngram@1 (-1.5 sigma) is the closest.
    assert out.count == 4 and out.closest.method == "ngram" and out.closest.depth == 1
    margin = guide.assess(SPACE, m, rows, [out.closest], Slo())[0].margin
    assert margin == pytest.approx(-1.51, abs=0.01) and out.probability == pytest.approx(guide._phi(margin))
    assert 0.0 < out.probability < 0.16
    sentence = out.sentence()
    assert "ruled out 4 unmeasured configuration(s) at z >= 1" in sentence and "16%" in sentence
    assert guide.ruled_out(SPACE, guide.Guidance(m, rows), lambda c: False, Slo()).sentence().startswith(
        "; the model-guided search measured every point")


def test_point_predictions_cover_measured_points_and_leave_out_infeasible_ones() -> None:
    m = model()
    predicted = guide.point_predictions(SPACE, m, lambda c: c.concurrency == 1)
    assert set(predicted) == {Candidate(method, depth, 1) for method in ("ngram", "mtp") for depth in (1, 2)}
    assert guide.point_predictions(SPACE, None, anything) == {}


def test_the_configuration_measured_last_goes_on_where_it_leads_its_concurrency() -> None:
    m = model(slow_mtp_at_4=False)
    rows = [row(Candidate("none", 0, b), m.predict("none", None, 0, b).tokens_per_s) for b in (1, 4)]
    done = taken(Candidate("none", 0, 1), Candidate("none", 0, 4), Candidate("mtp", 2, 1))
    # mtp@2 leads batch 4 too: it goes on there, although mtp@1 c1 would gain as much.
    pick = guide.next_pick(SPACE, guide.Guidance(m, rows), done, anything, Slo(), last=Candidate("mtp", 2, 1))
    assert pick.candidate == Candidate("mtp", 2, 4)
    # mtp@1 is open at batch 4 but not its best point there: the leader, mtp@2 c4, comes first.
    done = taken(Candidate("none", 0, 1), Candidate("none", 0, 4), Candidate("mtp", 1, 1))
    pick = guide.next_pick(SPACE, guide.Guidance(m, rows), done, anything, Slo(), last=Candidate("mtp", 1, 1))
    assert pick.candidate != Candidate("mtp", 1, 4) and pick.candidate.depth == 2  # the largest gain goes first


def test_a_pick_names_the_open_points_and_the_leaders_whose_engines_a_worker_should_spare() -> None:
    m = model(slow_mtp_at_4=False)
    rows = [row(Candidate("mtp", 2, 1), m.predict("mtp", None, 2, 1).tokens_per_s)]
    pick = guide.next_pick(SPACE, guide.Guidance(m, rows), taken(Candidate("mtp", 2, 1)), anything, Slo())
    opened = {entry.candidate for entry in guide.assess(SPACE, m, rows, [c for c in SPACE.candidates()
                                                                          if c != Candidate("mtp", 2, 1)], Slo())
              if entry.is_open(guide.GUIDE_Z)}
    assert set(pick.wanted) == opened | {Candidate("mtp", 2, 1)} and pick.candidate in opened


def test_points_the_model_cannot_predict_stay_open_and_infeasible_ones_are_never_proposed() -> None:
    curves = {("mtp", None): AcceptanceCurve("mtp", (PositionCounts(10, 9, 10), PositionCounts(10, 8, 10)))}
    done = taken(Candidate("ngram", 2, 4))  # the n-gram calibration run is running elsewhere: no curve yet
    pick = guide.next_pick(SPACE, guide.Guidance(model(curves), []), done, lambda c: c.method != "mtp", Slo())
    assert pick.candidate.method == "ngram" and pick.prediction is None and pick.reason == "not predictable yet"


def test_an_slo_the_optimistic_prediction_misses_closes_the_point() -> None:
    m = model()
    tpot = m.predict("mtp", None, 2, 1).tpot_ms_p90
    strict = Slo(tpot_ms=tpot / 10)
    mtp_at_1 = lambda c: c.method == "mtp" and c.concurrency == 1  # noqa: E731
    assert guide.next_pick(SPACE, guide.Guidance(m, []), taken(), mtp_at_1, strict) is None


# -- the study it drives ------------------------------------------------------------------------------


@pytest.mark.slow  # a whole study
def test_a_model_guided_study_predicts_every_trial_it_can_and_stops_on_its_own(options) -> None:
    result = tune(replace(options, sampler="model", n_trials=40, confirm=False))
    rows = [r for r in result.rows if r.phase == "screening"]
    assert result.status == "complete" and len(rows) < 4 + 3 * 2 * 2 * 2  # fewer than the space's points
    labels = [r.label for r in rows]
    calibration = [r for r in rows if r.method != "none" and r.depth == 2 and r.concurrency == 2][:3]
    assert labels[:3] == [r.label for r in calibration]  # one acceptance run per proposer at the maximum depth
    # No baseline is planned; one is screened only where it could lead, after the calibration runs.
    assert all(r.prediction is not None for r in rows if r.method == "none")
    predicted = [r for r in rows if r.prediction is not None]
    assert all(r.prediction["tokens_per_s"]["low"] <= r.prediction["tokens_per_s"]["value"]
               <= r.prediction["tokens_per_s"]["high"] for r in predicted)
    # Everything after the calibration runs was predicted before it was measured (random models
    # accept little, so often nothing can beat the baselines and the study stops right there).
    after = rows[labels.index(calibration[-1].label) + 1:]
    assert all(r.prediction is not None for r in after)
    with open_database(options.db_url) as database, database.session() as session:
        curves = performance.acceptance_profiles(session)
        assert sorted(c.proposer.split(":")[0] for c in curves) == ["draft", "mtp", "ngram"]
        # A curve reaches the deepest depth measured: 2, or past it where the guide explored beyond.
        deepest = {m: max(r.depth for r in rows if r.method == m) for m in ("draft", "mtp", "ngram")}
        assert all(c.max_depth == deepest[c.proposer.split(":")[0]] >= 2 and c.positions[0]["steps"] > 0 for c in curves)
        measured = sum(1 for r in rows if r.method != "none")
        assert sum(len(c.sources) for c in curves) == measured  # every speculative trial pooled once
        assert len(performance.cost_profiles(session)) == 1


@pytest.mark.slow  # a whole study
def test_a_second_study_reuses_the_stored_step_costs_and_acceptance(options) -> None:
    said: list[str] = []
    tune(replace(options, sampler="model", n_trials=40, confirm=False))
    second = tune(replace(options, sampler="model", study_name="again", n_trials=40, confirm=False),
                  progress=lambda update: said.append(update.current))
    # No timing worker: the stored step costs serve the second study (one cost profile in all).
    assert not any(text.startswith("timing step costs") for text in said), said
    with open_database(options.db_url) as database, database.session() as session:
        assert len(performance.cost_profiles(session)) == 1
    # No calibration runs either: the stored curves already reach the maximum depth, so every
    # speculative trial is predicted before it runs. (Which ones run depends on the timings: with
    # step costs measured on a busy machine the model may rule every one out.)
    rows = [r for r in second.rows if r.phase == "screening" and r.method != "none"]
    assert all(r.prediction is not None for r in rows)


@pytest.mark.slow  # a whole study
@pytest.mark.usefixtures("quiet_machine")
def test_the_grid_loads_each_configuration_once(options) -> None:
    result = tune(replace(options, methods=("ngram", "mtp"), sampler="grid", n_trials=None, confirm=False))
    rows = [r for r in result.rows if r.phase == "screening"]
    configs = [r.config_label for r in rows]
    # Each configuration's concurrency levels run back to back, so the worker restarts once per configuration.
    assert configs == sorted(configs, key=configs.index) and len(rows) == 2 + 2 * 2 * 2
    assert result.worker_starts == 1 + len(dict.fromkeys(configs))  # + the step timings


def test_gp_is_gone_and_model_is_the_default_on_every_engine(options) -> None:
    with pytest.raises(ConfigurationError, match="sampler gp was removed"):
        tune(replace(options, sampler="gp"))
    assert {TuneOptions(engine=engine).search_sampler.name for engine in ("embedded", "trtllm", "vllm")} == {"model"}


def test_a_failed_timing_stops_the_guided_study_instead_of_searching_blind(options, monkeypatch) -> None:
    """No silent fallback: without step-cost timings the model-guided search has no model, so the
    study ends with the engine's one line and the way out (--sampler tpe), before any trial."""
    def failing(*_args, **_kwargs):
        raise WorkerFailure("error", "EngineError: vLLM 0.9.0 has no synthetic acceptance")

    monkeypatch.setattr(EngineWorker, "time_steps", failing)
    with pytest.raises(EngineError, match=r"timing failed \(EngineError: vLLM 0.9.0 has no synthetic acceptance\); "
                                          "pass --sampler tpe"):
        tune(replace(options, sampler="model"))


@pytest.mark.slow  # a whole study
def test_an_enqueued_guided_trial_is_an_optuna_trial_with_its_parameters(options) -> None:
    tune(replace(options, sampler="model", n_trials=5, confirm=False))
    trials = optuna.load_study(study_name="tiny", storage=options.db_url).trials
    # The calibration runs first (no baseline is planned), each with its parameters.
    assert all("method" in t.params for t in trials[:3])
    assert all(OPTUNA_CONCURRENCY_KEY in t.params for t in trials) and len(trials) == 5
    with open_database(options.db_url) as database, database.session() as session:
        assert len(results.study_rows(session, results.find_study(session, "tiny").id)) == 5


# -- beyond --max-depth -------------------------------------------------------------------------------


def test_a_curve_is_continued_geometrically_with_a_wider_error() -> None:
    curve = AcceptanceCurve("mtp", (PositionCounts(1000, 900, 1000), PositionCounts(1000, 800, 1000)))
    longer = extended_curve(curve, 4)
    assert [round(longer.rate(i), 3) for i in range(1, 5)] == [0.9, 0.8, 0.712, 0.632]  # x 0.8 / 0.9 each
    assert [p.steps for p in longer.positions] == [1000, 1000, 250, 250]
    assert longer.omega_se(3) > curve.omega_se(2)
    assert extended_curve(curve, 2) is curve


def test_the_model_sampler_walks_past_max_depth_along_the_edge_where_the_prediction_could_win() -> None:
    """MTP accepts 95 % of its drafts and costs nothing more per depth: deeper is faster, so with
    exploration on the guide goes past --max-depth 2 one depth at a time (3, then 4, never 5), at
    one concurrency only, each step only while the last one measured is the proposer's best; with
    exploration off, it stops."""
    flat = model({("mtp", None): AcceptanceCurve("mtp", (PositionCounts(1000, 950, 1000), PositionCounts(1000, 900, 1000))),
                  ("ngram", None): AcceptanceCurve("ngram", (PositionCounts(1000, 10, 300), PositionCounts(1000, 5, 300)))},
                 slow_mtp_at_4=False)
    wide = extended_model(flat, 4)
    measured = [Candidate("none", 0, b) for b in (1, 4)] + [Candidate("mtp", 2, b) for b in (1, 4)]
    rows = [row(c, flat.predict(c.method, c.draft, c.depth, c.concurrency).tokens_per_s) for c in measured]
    done = taken(*measured, Candidate("mtp", 1, 1), Candidate("mtp", 1, 4))
    assert guide.next_pick(SPACE, guide.Guidance(flat, rows), done, anything, Slo()) is None  # nothing inside could win
    picks = []
    while (pick := guide.next_pick(SPACE, guide.Guidance(flat, rows), done, anything, Slo(),
                                   explore_beyond=True)) is not None:
        picks.append(pick.candidate)
        done.append(SearchSpace.params(pick.candidate))
        c = pick.candidate
        rows.append(row(c, wide.predict(c.method, c.draft, c.depth, c.concurrency).tokens_per_s))  # as predicted
    assert [(c.method, c.depth) for c in picks] == [("mtp", 3), ("mtp", 4)]
    assert picks[0].concurrency == picks[1].concurrency
    # A step that measures slower than the proposer's best ends the walk.
    rows[-2] = row(picks[0], 1.0)
    assert guide.edge_steps(SPACE, rows[:-1], Slo(), flat) == []


def test_an_unpredictable_point_past_max_depth_is_never_open() -> None:
    """Inside the space ignorance opens a point; past --max-depth it does not (no timings: no model)."""
    done = taken(*(Candidate(m, d, b) for m, d in (("none", 0), ("mtp", 1), ("mtp", 2), ("ngram", 1), ("ngram", 2))
                   for b in (1, 4)))
    assert guide.next_pick(SPACE, guide.Guidance(None, []), done, anything, Slo(), explore_beyond=True) is None


def test_a_trial_past_max_depth_is_enqueued_and_read_back_without_changing_the_space() -> None:
    deep = Candidate("mtp", 4, 1)
    assert SPACE.beyond_depths() == range(3, 5) and deep in SPACE.beyond() and deep not in SPACE.candidates()
    assert SearchSpace(("none", "mtp"), (), 15, (1,)).beyond_depths() == range(16, 17)  # never past MAX_DEPTH
    study = optuna.create_study()
    study.enqueue_trial(SearchSpace.params(deep), user_attrs=SPACE.user_attrs(deep))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an out-of-range fixed parameter would warn
        assert SPACE.suggest(study.ask()) == deep
    assert SPACE.to_dict() == {"methods": ["none", "mtp", "ngram"], "drafts": [], "max_depth": 2, "concurrencies": [1, 4]}
