"""Model-guided search: measure only what the performance model cannot rule out.

The default sampler (``--sampler model``). Every proposal is enqueued into the Optuna study
(``study.enqueue_trial``), so the study, its storage, the distribution over workers and
optuna-dashboard stay Optuna's; the guide only decides what comes next, from the study's stored
rows, every time a worker asks (under the study lock, so two workers never pick the same point):

1. **Calibrate.** The baselines at every batch size (planned by the tuner), then for each proposer
   without an acceptance curve reaching the study's maximum depth one run at that depth, at the
   largest batch size that fits (one run gives the curve of every smaller depth, see
   :mod:`autotune.perfmodel.acceptance`). The step costs were timed before the first trial.
2. **Predict** every point of the space, with the corrections learned from the measurements so
   far (:meth:`PerformanceModel.calibrate`).
3. **Measure what could still be best.** At each batch size the incumbent is the best measured
   tokens/s (under the SLOs, when there are any). An unmeasured feasible point is *open* when its
   optimistic prediction, ``value x exp(GUIDE_Z x sigma)``, beats the incumbent by more than
   ``TIE_MARGIN``; sigma holds the acceptance, cost and model uncertainty, and the model part is
   learned from single screening passes, so it carries the incumbent's noise too. With SLOs, a
   point is open only if its optimistic TPOT and TTFT meet them.
4. **Order for loads.** The configuration measured last goes on at another batch size where it is
   the most promising open point (the worker keeps that engine loaded, so a configuration runs at
   its batch sizes before the next load); otherwise the open point with the largest optimistic gain
   over its incumbent. A configuration that is open at a batch size but not its most promising
   point waits: measuring the leader there first may close it.
5. **Stop** when no point is open: the study ends, then the confirmation phase re-measures the
   finalists with the full protocol.

**Beyond --max-depth** (unless ``--no-explore-beyond``): the points up to ``BEYOND_DEPTHS`` deeper
(:meth:`SearchSpace.beyond`) are predicted with the acceptance curves continued past the deepest
measured position (:mod:`autotune.search.beyond`) and compete with the others under the same rule;
unlike a point inside the space, one that cannot be predicted is never open there.

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

# A point is open when P(it beats the incumbent by more than TIE_MARGIN) > 1 - Phi(GUIDE_Z) = 31 %.
# sigma_model is learned from single screening passes, so it holds the incumbent's noise as well.
GUIDE_Z = 0.5
# Gains below this are ties on our machines (a confirmation resolves ~5 % at best, docs/benchmarks.md):
# measuring a point that can only tie the incumbent cannot change the recommendation's quality.
TIE_MARGIN = 0.05


@dataclass(frozen=True)
class Pick:
    """The guide's next point and why."""

    candidate: Candidate
    reason: str
    prediction: Prediction | None = None


def calibration_runs(space: SearchSpace, model: PerformanceModel | None, feasible: Any) -> list[Candidate]:
    """One run at the maximum depth per proposer whose curve does not reach it (step 1)."""
    runs = []
    for method, draft in space.proposers():
        if model is not None and model.can_predict(method, draft, space.max_depth):
            continue
        sizes = [b for b in reversed(space.batch_sizes) if feasible(Candidate(method, space.max_depth, b, draft))]
        if sizes:
            runs.append(Candidate(method, space.max_depth, sizes[0], draft))
    return runs


def incumbents(rows: Iterable[Any], slo: Any) -> dict[int, float]:
    """Best measured tokens/s per batch size among complete screening rows that meet the SLOs."""
    best: dict[int, float] = {}
    for row in rows:
        if row.state == "complete" and row.phase == "screening" and row.tokens_per_s and slo.is_met(row):
            best[row.batch_size] = max(best.get(row.batch_size, 0.0), row.tokens_per_s)
    return best


def next_pick(
    space: SearchSpace,
    model: PerformanceModel | None,
    rows: Sequence[Any],
    taken: list[dict[str, Any]],
    feasible: Any,
    slo: Any,
    last: Candidate | None = None,
    z: float = GUIDE_Z,
    explore_beyond: bool = False,
) -> Pick | None:
    """The next point to measure, or None when nothing is open (see the module doc). ``taken``:
    the Optuna params of every counted trial (running and waiting included); ``feasible(c)``: False
    for a point that cannot run here (it is never proposed); ``explore_beyond``: the points past
    ``space.max_depth`` compete too."""
    untaken = [c for c in space.candidates() if SearchSpace.params(c) not in taken and feasible(c)]
    for run in calibration_runs(space, model, feasible):
        if run in untaken:
            return Pick(run, f"acceptance curve of {run.config_label.rsplit('@', 1)[0]} at depth {run.depth}")
    wide = extended_model(model, space.max_depth + BEYOND_DEPTHS) if model is not None and explore_beyond else None
    past = [c for c in space.beyond() if SearchSpace.params(c) not in taken and feasible(c)] if wide else []
    best = incumbents(rows, slo)
    scored = []
    for candidate in untaken + past:
        if candidate.method == BASELINE_METHOD:
            continue
        beyond = candidate.depth > space.max_depth
        source = wide if beyond else model
        prediction = (source.predict(candidate.method, candidate.draft, candidate.depth, candidate.batch_size)
                      if source else None)
        if beyond and prediction is None:
            continue  # ignorance opens points inside the space only
        gain = _gain(prediction, best.get(candidate.batch_size), slo, z)
        if gain is not None:
            scored.append((gain, candidate, prediction))
    if not scored:
        return None
    # The loaded configuration goes on where it is its batch size's best open point (where it is
    # open but another point there is more promising, that one may close it: measure that first).
    leaders = {}
    for entry in scored:
        size = entry[1].batch_size
        if size not in leaders or entry[0] > leaders[size][0]:
            leaders[size] = entry
    same = [entry for entry in leaders.values() if last is not None and _same_config(entry[1], last)]
    gain, candidate, prediction = max(same or scored, key=lambda entry: entry[0])
    why = "not predictable yet" if prediction is None else (
        f"predicted {prediction.tokens_per_s:.0f} tok/s [{prediction.low:.0f}, {prediction.high:.0f}] could beat "
        f"{best.get(candidate.batch_size, 0):.0f}"
        + (f" (beyond --max-depth {space.max_depth})" if candidate.depth > space.max_depth else ""))
    return Pick(candidate, why, prediction)


def _gain(prediction: Prediction | None, incumbent: float | None, slo: Any, z: float) -> float | None:
    """How far the optimistic prediction beats the incumbent (log ratio), None when it cannot."""
    if prediction is None:
        return math.inf
    if slo.limits and any(_optimistic(prediction, name, z) > limit for name, limit in slo.limits.items()):
        return None
    optimistic = prediction.bound(z)[1]
    if incumbent is None:
        return math.log(optimistic)
    bar = incumbent * (1 + TIE_MARGIN)
    return math.log(optimistic / bar) if optimistic > bar else None


def _optimistic(prediction: Prediction, name: str, z: float) -> float:
    value = getattr(prediction, name, None)
    return -math.inf if value is None else value * math.exp(-z * prediction.sigma)


def _same_config(a: Candidate, b: Candidate) -> bool:
    return (a.method, a.depth, a.draft) == (b.method, b.depth, b.draft)
