"""Model-guided search: measure only what the performance model cannot rule out.

The default sampler (``--sampler model``). Every proposal is enqueued into the Optuna study
(``study.enqueue_trial``), so the study, its storage, the distribution over workers and
optuna-dashboard stay Optuna's; the guide only decides what comes next, from the study's stored
rows, every time a worker asks (under the study lock, so two workers never pick the same point):

1. **Calibrate.** For each proposer without an acceptance curve reaching the study's maximum depth,
   one run at that depth, at the largest concurrency that fits (one run gives the curve of every
   smaller depth, see :mod:`autotune.perfmodel.acceptance`). The step costs were timed before the
   first trial. The baselines are not planned: each is a point like the others (step 3), predicted
   from the timed step costs and screened only when it could lead its concurrency; the confirmation
   measures every concurrency's baseline paired with its finalists, which is where the speedups come
   from (:meth:`autotune.search.samplers.ModelGuidedSampler.planned`).
2. **Predict** every point of the space, with the corrections learned from the measurements so
   far (:meth:`PerformanceModel.calibrate`).
3. **Measure what could still be best.** At each concurrency the incumbent is the best measured
   tokens/s (under the SLOs, when there are any), each measured pass first shrunk toward its own
   prediction (:func:`shrunk_pass`: the best of several noisy single passes is biased up, the
   winner's curse). An unmeasured feasible point is *open* when

       log(prediction) + GUIDE_Z x sqrt(sigma_prediction^2 + sigma_incumbent^2)
           > log(incumbent x (1 + TIE_MARGIN))

   sigma_prediction is the prediction's error against the true value (:func:`true_sigma`: its
   acceptance and leave-one-out model uncertainty, less the pass noise the latter holds);
   sigma_incumbent is what is left of one screening pass's noise after the shrinkage. The pass
   noise is this machine's pass-to-pass spread as the cost profile measured it (its kept timing
   rounds, :attr:`CostProfile.spread`): it is there before the first trial, on the same machine
   and in the same session, whereas the study's repeated passes (confirmation) come only after
   the pruning is over. At GUIDE_Z = 1 a closed point has at most a 16 % chance of beating its
   incumbent by the tie margin. With SLOs, a point is open only if its optimistic TPOT and TTFT
   meet them.
4. **Order for loads.** The configuration measured last goes on at another concurrency where it is
   the most promising open point (the worker keeps that engine loaded, so a configuration runs at
   its concurrency levels before the next load); otherwise the open point with the largest optimistic gain
   over its incumbent. A configuration that is open at a concurrency but not its most promising
   point waits: measuring the leader there first may close it.
5. **Stop** when no point is open: the study ends, then the confirmation phase re-measures the
   finalists with the full protocol, the best predicted point per concurrency among them when its
   optimistic bound reaches the leader, measured or not (:func:`point_predictions`,
   :func:`autotune.search.confirm.finalists`). :func:`ruled_out` says what was closed and how
   likely the closest closed point is to beat its incumbent after all (the tune summary).

Rules and reasons: docs/statistics.md.

**Beyond --max-depth** (unless ``--no-explore-beyond``): up to ``BEYOND_DEPTHS`` deeper
(:meth:`SearchSpace.beyond_depths`), one step at a time along the edge (:func:`edge_steps`): a
proposer whose best screened point sits at the deepest depth measured at its concurrency, at or past
the maximum, may go one depth deeper there, and nowhere else. The step is predicted with the
acceptance curves continued past the deepest measured position (:mod:`autotune.search.beyond`)
and competes with the others under the same rule; unlike a point inside the space, one that cannot
be predicted is never open there. Only the edge is stepped past: opening every proposer at every
concurrency deeper would spend many configurations (and builds) on depths that rarely win.

A point the model cannot predict (its proposer has no curve yet, or the engine took no timings)
is open: ignorance never rules a point out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.perfmodel.model import PerformanceModel, Prediction
from autotune.search.beyond import extended_model
from autotune.search.space import BASELINE_METHOD, BEYOND_DEPTHS, Candidate, SearchSpace

# A point is open when P(it beats the incumbent by more than TIE_MARGIN) > 1 - Phi(GUIDE_Z) = 16 %
# (a lower z closes more points wrongly, and closed points are never looked at again).
GUIDE_Z = 1.0
# Gains below this are ties (about what a confirmation can resolve): measuring a point that can only
# tie the incumbent cannot change the recommendation's quality.
TIE_MARGIN = 0.05


@dataclass(frozen=True)
class Pick:
    """The guide's next point and why; ``wanted``: the points still open and each concurrency's
    leader, whose engines a worker that keeps several should spare (:meth:`EngineWorker.keep`)."""

    candidate: Candidate
    reason: str
    prediction: Prediction | None = None
    wanted: tuple[Candidate, ...] = ()


def calibration_runs(space: SearchSpace, model: PerformanceModel | None, feasible: Any) -> list[Candidate]:
    """One run at the maximum depth per proposer whose curve does not reach it (step 1)."""
    runs = []
    for method, draft in space.proposers():
        if model is not None and model.can_predict(method, draft, space.max_depth):
            continue
        sizes = [b for b in reversed(space.concurrencies) if feasible(Candidate(method, space.max_depth, b, draft))]
        if sizes:
            runs.append(Candidate(method, space.max_depth, sizes[0], draft))
    return runs


@dataclass(frozen=True)
class Incumbent:
    """The best measured point of a concurrency, shrunk (see :func:`shrunk_pass`): tokens/s and
    the log standard deviation left around it."""

    tokens_per_s: float
    sigma: float


def shrunk_pass(measured: float, predicted: float | None, sigma_predicted: float | None,
                sigma_pass: float) -> tuple[float, float]:
    """One screening pass shrunk toward the prediction made for it: (tokens/s, log sigma).

    Normal-normal in logs: the prediction is a prior N(log p, sp^2) for the true value, the pass
    a measurement N(true, s^2) of it. The posterior is

        log value = w log m + (1 - w) log p,   w = sp^2 / (sp^2 + s^2)
        sigma^2   = sp^2 s^2 / (sp^2 + s^2)

    so a pass far above its prediction is trusted as far as the pass noise allows. Without a
    prediction (or without pass noise) the pass stands as measured.
    """
    if predicted is None or not sigma_predicted or predicted <= 0 or sigma_pass <= 0:
        return measured, sigma_pass
    prior, noise = sigma_predicted ** 2, sigma_pass ** 2
    weight = prior / (prior + noise)
    value = math.exp(weight * math.log(measured) + (1 - weight) * math.log(predicted))
    return value, math.sqrt(prior * noise / (prior + noise))


def incumbents(rows: Iterable[Any], slo: Any, model: PerformanceModel | None = None) -> dict[int, Incumbent]:
    """Best shrunk tokens/s per concurrency among complete screening rows that meet the SLOs
    (:func:`shrunk_passes`)."""
    return {size: shrunk for size, (_row, shrunk) in leading_passes(rows, slo, model).items()}


def leading_passes(rows: Iterable[Any], slo: Any,
                   model: PerformanceModel | None = None) -> dict[int, tuple[Any, Incumbent]]:
    """Per concurrency, the row of the best shrunk pass and that pass (:func:`incumbents`)."""
    best: dict[int, tuple[Any, Incumbent]] = {}
    for row, shrunk in shrunk_passes(rows, slo, model):
        if row.concurrency not in best or shrunk.tokens_per_s > best[row.concurrency][1].tokens_per_s:
            best[row.concurrency] = (row, shrunk)
    return best


def shrunk_passes(rows: Iterable[Any], slo: Any, model: PerformanceModel | None) -> list[tuple[Any, Incumbent]]:
    """Every complete screening row that meets the SLOs, with its pass shrunk (:func:`shrunk_pass`)
    toward the prediction stored with it (made before it ran), else the model's."""
    sigma_pass = pass_sigma(model)
    shrunk = []
    for row in rows:
        if row.state == "complete" and row.phase == "screening" and row.tokens_per_s and slo.is_met(row):
            predicted, sigma = _prediction_of(row, model)
            shrunk.append((row, Incumbent(*shrunk_pass(row.tokens_per_s, predicted, sigma, sigma_pass))))
    return shrunk


def true_sigma(sigmas: dict[str, float] | None, sigma: float, sigma_pass: float) -> float:
    """A prediction's log error against the configuration's *true* tokens/s, from its
    predict-then-measure-once ``sigma`` and its components ``sigmas`` (acceptance, cost, model).

    A prediction's sigma is the error of "predict, then measure once": the cost term is this
    machine's pass noise (the spread the pass noise is taken from, :func:`pass_sigma`) and the
    leave-one-out model term was fitted on single passes, so it holds that noise as well:
    Var(pass - prediction) = Var(true - prediction) + sigma_pass^2. Pruning compares true values
    (the incumbent's pass noise is in its own sigma), so the pass noise is taken out of the model
    term and the cost term is dropped::

        sigma_true^2 = sigma_acceptance^2 + max(sigma_model^2 - sigma_pass^2, sigma_model^2 / 4)

    (at most three quarters of the model's variance is put down to pass noise: it is estimated
    from few residuals). Without components, ``sigma`` stands."""
    if not sigmas or "model" not in sigmas:
        return sigma
    model = sigmas["model"] ** 2
    return math.sqrt(sigmas.get("acceptance", 0.0) ** 2 + max(model - sigma_pass ** 2, model / 4))


def pass_sigma(model: PerformanceModel | None) -> float:
    """One screening pass's relative noise on this machine: the cost profile's kept timing rounds'
    spread (module doc, step 3); 0 without a model."""
    return model.cost.spread if model is not None else 0.0


@dataclass(frozen=True)
class Assessed:
    """An unmeasured point against its concurrency's incumbent: ``margin`` is how many combined
    standard deviations its prediction lies above the bar, incumbent x (1 + TIE_MARGIN) (negative:
    below); inf when it cannot be predicted or has no incumbent, -inf when its SLOs rule it out."""

    candidate: Candidate
    prediction: Prediction | None
    margin: float
    gain: float  # log(optimistic bound / bar) at z: the pick order among open points

    def is_open(self, z: float) -> bool:
        return self.margin > -z


def assess(space: SearchSpace, model: PerformanceModel | None, rows: Sequence[Any], untaken: Iterable[Candidate],
           slo: Any, z: float = GUIDE_Z, wide: PerformanceModel | None = None) -> list[Assessed]:
    """Every untaken point, the baselines included, scored against its incumbent (module doc, step 3). ``wide``:
    the model continued past ``space.max_depth`` (:func:`autotune.search.beyond.extended_model`), which
    predicts the points there; one it cannot predict is left out (ignorance opens points inside the
    space only)."""
    best = incumbents(rows, slo, model)
    assessed = []
    for candidate in untaken:
        beyond = candidate.depth > space.max_depth
        source = wide if beyond else model
        prediction = (source.predict(candidate.method, candidate.draft, candidate.depth, candidate.concurrency)
                      if source else None)
        if beyond and prediction is None:
            continue
        assessed.append(_assess(candidate, prediction, best.get(candidate.concurrency), slo, z, pass_sigma(model)))
    return assessed


def _assess(candidate: Candidate, prediction: Prediction | None, incumbent: Incumbent | None, slo: Any,
            z: float, sigma_pass: float) -> Assessed:
    if prediction is None:
        return Assessed(candidate, None, math.inf, math.inf)
    if slo.limits and any(_optimistic(prediction, name, z) > limit for name, limit in slo.limits.items()):
        return Assessed(candidate, prediction, -math.inf, -math.inf)
    if incumbent is None:
        return Assessed(candidate, prediction, math.inf, math.log(prediction.bound(z)[1]))
    sigma = math.hypot(true_sigma(prediction.sigmas, prediction.sigma, sigma_pass), incumbent.sigma)
    distance = math.log(prediction.tokens_per_s / (incumbent.tokens_per_s * (1 + TIE_MARGIN)))
    margin = distance / sigma if sigma > 0 else math.copysign(math.inf, distance)
    return Assessed(candidate, prediction, margin, distance + z * sigma)


@dataclass(frozen=True)
class Guidance:
    """What the guide decides on: the performance model (None without step costs) and the rows it
    was built from (the study's rows measured undisturbed)."""

    model: PerformanceModel | None
    rows: Sequence[Any]


def next_pick(
    space: SearchSpace,
    guidance: Guidance,
    taken: list[dict[str, Any]],
    feasible: Any,
    slo: Any,
    last: Candidate | None = None,
    explore_beyond: bool = False,
) -> Pick | None:
    """The next point to measure, or None when nothing is open at z = GUIDE_Z (see the module doc).
    ``taken``: the Optuna params of every counted trial (running and waiting included);
    ``feasible(c)``: False for a point that cannot run here (it is never proposed);
    ``explore_beyond``: the points past ``space.max_depth`` compete too."""
    model, rows, z = guidance.model, guidance.rows, GUIDE_Z
    untaken = [c for c in space.candidates() if SearchSpace.params(c) not in taken and feasible(c)]
    for run in calibration_runs(space, model, feasible):
        if run in untaken:
            return Pick(run, f"acceptance curve of {run.config_label.rsplit('@', 1)[0]} at depth {run.depth}")
    wide = extended_model(model, space.max_depth + BEYOND_DEPTHS) if model is not None and explore_beyond else None
    past = [c for c in edge_steps(space, rows, slo, model)
            if SearchSpace.params(c) not in taken and feasible(c)] if wide else []
    scored = [entry for entry in assess(space, model, rows, untaken + past, slo, z, wide) if entry.is_open(z)]
    if not scored:
        return None
    # The loaded configuration goes on where it is its concurrency's best open point (where it is
    # open but another point there is more promising, that one may close it: measure that first).
    leaders: dict[int, Assessed] = {}
    for entry in scored:
        size = entry.candidate.concurrency
        if size not in leaders or entry.gain > leaders[size].gain:
            leaders[size] = entry
    same = [entry for entry in leaders.values() if last is not None and _same_config(entry.candidate, last)]
    pick = max(same or scored, key=lambda entry: entry.gain)
    prediction = pick.prediction
    leading = leading_passes(rows, slo, model)
    best = leading[pick.candidate.concurrency][1] if pick.candidate.concurrency in leading else None
    why = "not predictable yet" if prediction is None else (
        f"predicted {prediction.tokens_per_s:.0f} tok/s [{prediction.low:.0f}, {prediction.high:.0f}] could beat "
        f"{best.tokens_per_s if best else 0:.0f}"
        + (f" (beyond --max-depth {space.max_depth})" if pick.candidate.depth > space.max_depth else ""))
    wanted = [entry.candidate for entry in scored] + [
        Candidate(row.method, row.depth, row.concurrency, row.draft) for row, _shrunk in leading.values()]
    return Pick(pick.candidate, why, prediction, tuple(wanted))


def edge_steps(space: SearchSpace, rows: Sequence[Any], slo: Any, model: PerformanceModel | None) -> list[Candidate]:
    """The points past ``space.max_depth`` worth predicting: per proposer at most one, a depth
    deeper than its best screened point, at that point's concurrency, when that point is the deepest
    of the proposer measured there and lies at or past the maximum depth (module doc, "Beyond").
    The proposer's best is its shrunk pass with the highest ratio to its concurrency's incumbent;
    among equals (it leads several concurrency levels) the largest concurrency, then the deepest."""
    shrunk = shrunk_passes(rows, slo, model)
    best = incumbents(rows, slo, model)
    beyond = set(space.beyond_depths())
    steps = []
    for method, draft in space.proposers():
        mine = [(row, value.tokens_per_s / best[row.concurrency].tokens_per_s) for row, value in shrunk
                if row.method == method and (method != "draft" or row.draft == draft)]
        if not mine:
            continue
        top, _ = max(mine, key=lambda entry: (round(entry[1], 9), entry[0].concurrency, entry[0].depth))
        deepest = max(row.depth for row, _ in mine if row.concurrency == top.concurrency)
        if top.depth == deepest and top.depth >= space.max_depth and top.depth + 1 in beyond:
            steps.append(Candidate(method, top.depth + 1, top.concurrency, draft))
    return steps


def point_predictions(space: SearchSpace, model: PerformanceModel | None, feasible: Any) -> dict[Candidate, Prediction]:
    """The model's predictions of every feasible speculative point of the space, measured or not
    (for :func:`autotune.search.confirm.finalists`: a measured point's one pass may be far off, and
    its prediction, fitted on every pass, is the second opinion)."""
    if model is None:
        return {}
    predictions = {}
    for c in space.candidates():
        if c.method != BASELINE_METHOD and feasible(c):
            prediction = model.predict(c.method, c.draft, c.depth, c.concurrency)
            if prediction is not None:
                predictions[c] = prediction
    return predictions


@dataclass(frozen=True)
class RuledOut:
    """What the guide closed when it stopped: how many points, and the closed point most likely to
    beat its incumbent by the tie margin after all, with that probability, Phi(margin)."""

    count: int
    closest: Candidate | None
    probability: float

    def sentence(self) -> str:
        if self.count == 0:
            return "; the model-guided search measured every point it could not predict or rule out"
        return (f"; the model-guided search ruled out {self.count} unmeasured configuration(s) at z >= {GUIDE_Z:g} "
                f"(each had under {1 - _phi(GUIDE_Z):.0%} chance of beating its concurrency's best by "
                f"{TIE_MARGIN:.0%}; the closest: {self.closest.label}, {self.probability:.0%})")


def ruled_out(space: SearchSpace, guidance: Guidance, feasible: Any, slo: Any) -> RuledOut:
    """The points the guide closed at z = GUIDE_Z, given what it decided on (see :class:`RuledOut`)."""
    model, rows, z = guidance.model, guidance.rows, GUIDE_Z
    tried = _tried(rows)
    untaken = [c for c in space.candidates() if c not in tried and feasible(c)]
    closed = [entry for entry in assess(space, model, rows, untaken, slo, z) if not entry.is_open(z)]
    if not closed:
        return RuledOut(0, None, 0.0)
    closest = max(closed, key=lambda entry: entry.margin)
    return RuledOut(len(closed), closest.candidate, _phi(closest.margin))  # P(true margin > 0)


def _tried(rows: Sequence[Any]) -> set[Candidate]:
    """The points a screening trial ran (complete, failed or infeasible alike)."""
    return {Candidate(r.method, r.depth, r.concurrency, r.draft) for r in rows if r.phase == "screening"}


def _phi(x: float) -> float:
    """The standard normal CDF."""
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def _prediction_of(row: Any, model: PerformanceModel | None) -> tuple[float | None, float | None]:
    """(tokens/s, true-value sigma, :func:`true_sigma`) predicted for a measured row: the one
    stored with it, else the model's."""
    stored = getattr(row, "prediction", None)
    sigma_pass = pass_sigma(model)
    if isinstance(stored, dict) and isinstance(stored.get("tokens_per_s"), dict) and stored.get("sigma"):
        return stored["tokens_per_s"].get("value"), true_sigma(stored.get("sigmas"), stored["sigma"], sigma_pass)
    if model is None:
        return None, None
    prediction = model.predict(row.method, row.draft, row.depth, row.concurrency)
    return (None, None) if prediction is None else (
        prediction.tokens_per_s, true_sigma(prediction.sigmas, prediction.sigma, sigma_pass))


def _optimistic(prediction: Prediction, name: str, z: float) -> float:
    value = getattr(prediction, name, None)
    return -math.inf if value is None else value * math.exp(-z * prediction.sigma)


def _same_config(a: Candidate, b: Candidate) -> bool:
    return (a.method, a.depth, a.draft) == (b.method, b.depth, b.draft)
