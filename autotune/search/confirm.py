"""The confirmation phase: the study's finalists re-measured with the full protocol.

Screening (the Optuna trials) measures each configuration once, which is enough to rank a large
space but not to decide between neighbours, whose single passes vary more than they differ. So the
study ends by confirming, at each concurrency:

* **Finalists**: every screened configuration whose optimistic bound, its screening tokens/s times
  ``1 + SCREENING_NOISE``, reaches the best screened tokens/s there (the baseline included), at most
  ``MAX_FINALISTS``: the fastest first, then the simplest to operate (n-gram, MTP, draft; smaller
  depth first). Among tied configurations the decision recommends the simplest, so a study must
  confirm the simple ones near the top to reach the answer a re-run reaches: runners-up picked by
  screening tokens/s (noise) would differ from run to run across a flat band of depths, and so
  would the recommendation.
* **The best predicted point**: the screening stops when the model rules every other point out at
  z = 1, which still leaves each a chance of up to 16 %, and a screened point rests on one pass,
  which can be far low without being flagged, so the best configuration can miss the finalists. So
  the configuration with the highest prediction at a concurrency, measured or not, joins its finalists
  (beyond ``MAX_FINALISTS``) when it is not one yet and its optimistic bound, prediction x
  exp(GUIDE_Z x sigma), still reaches the best screened tokens/s there. The predictions come in as
  values (``predicted``, from :func:`autotune.search.guide.point_predictions`, called by the
  confirmation phase, :mod:`autotune.search.confirmation`): this module never builds a model.
* **The floor where none wins**: an engine whose server cannot switch a kind off (TensorRT-LLM's
  one-model MTP / EAGLE-3: :class:`autotune.analysis.offstate.OffRule`, the adapter's ``off_rule``)
  serves it at draft length 1 where none leads; so at a concurrency whose screening leader is the
  baseline, depth 1 of every such screened configuration joins the finalists (beyond
  ``MAX_FINALISTS``), and the export carries that measured floor against none. ``floor`` (from the
  study setup) says a candidate's floor; without it nothing is added. An engine whose server can run
  K = 0 but pays for it (vLLM: the drafter still runs every step) gets K = 0 measured there the same
  way (``zero``, from the study setup): a candidate at depth 0, run as :class:`EngineConfig` ``off_state``
  and stored with ``extra["off_state"]``, which prices the off state and never decides
  (:func:`autotune.analysis.decision.deciding_rows`).
* **Protocol**: the finalists and the baseline, per concurrency, in interleaved rounds with racing
  (:mod:`autotune.engines.protocol`): a finalist is dropped as soon as its paired interval to the
  leader falls below 1. The study's worker runs every concurrency: an engine that manages its
  engines (vLLM, TensorRT-LLM) keeps the ones screening built, so a configuration is not built again
  per concurrency, and before each concurrency it is told what this and the later concurrency levels run
  (:meth:`EngineWorker.keep`): making room, it shuts down what no concurrency left needs first, not
  the least recently used, so it does not rebuild an engine it closed a concurrency earlier. The
  embedded engine gets a fresh process per concurrency
  (:mod:`autotune.engines.worker`). ``ConfirmedConcurrency.loads`` counts the builds a concurrency cost.
* **Retries**: a concurrency whose worker fails (crash, hang, out of memory) is measured again, up
  to ``attempts`` times in all: without its baseline no speedup there can be given.
* **Neighbour check**: a confirmed baseline implausibly slower than a smaller concurrency's
  (:func:`~autotune.analysis.plausibility.implausible_baselines`) has its concurrency confirmed
  again; if it fails again, that concurrency's rows are marked and its speedups are not reported.
* **Time budget**: the study's deadline (``--timeout``, :mod:`autotune.search.deadline`) bounds
  the confirmation too: each concurrency's protocol gets what is left of it as a hard cap (rounds it
  discards included), and a concurrency reached after the deadline is not measured but marked
  ``out_of_time``; :mod:`autotune.search.confirmation` stores what was confirmed and says which
  concurrency levels were not.

Confirmed rows are stored with ``phase = "confirmation"`` and ``extra["confirmation"] = {"run",
"screened"}``; the latest run decides (:mod:`autotune.analysis.decision`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from autotune.analysis import decision
from autotune.analysis.plausibility import implausible_baselines
from autotune.engines.base import EngineConfig
from autotune.engines.protocol import ProtocolOptions, ProtocolResult, RepeatedMeasurement
from autotune.engines.worker import EngineWorker, WorkerFailure
from autotune.perfmodel.model import Prediction
from autotune.search.budget import TRANSIENT_FAILURES
from autotune.search.deadline import Deadline
from autotune.search.guide import GUIDE_Z
from autotune.search.space import BASELINE_METHOD, Candidate
from autotune.store.results import TrialRow

# Relative noise of one screening pass: a finalist's screening figure times 1 + this may still lead.
SCREENING_NOISE = 0.25
MAX_FINALISTS = 4


def finalists(rows: Sequence[TrialRow], concurrencies: Sequence[int], slo: Any,
              predicted: Mapping[Candidate, Prediction] | None = None,
              floor: Callable[[Candidate], int] | None = None,
              zero: Callable[[Candidate], bool] | None = None) -> dict[int, list[Candidate]]:
    """The speculative configurations to confirm at each concurrency (see the module doc);
    ``predicted``: the model's predictions of the space's configurations, measured or not; ``floor``: the smallest
    draft length the study's engine serves a candidate's kind at (1: it cannot be switched off); ``zero``: whether
    its K = 0 must be measured where none leads."""
    screened = decision.screening_rows(rows)
    chosen: dict[int, list[Candidate]] = {}
    for concurrency in concurrencies:
        here = [row for row in screened if row.concurrency == concurrency]
        if not here:
            continue
        least = min(slo.violation(row) for row in here)
        pool = [row for row in here if slo.violation(row) == least]
        incumbent = max(row.tokens_per_s for row in pool)
        near = sorted((row for row in pool if row.method != decision.BASELINE
                       and row.tokens_per_s * (1 + SCREENING_NOISE) >= incumbent),
                      key=lambda row: -row.tokens_per_s)
        # The screening leader, then the simplest of the rest: among tied configurations the decision
        # recommends the simplest, so those are the ones a confirmation must not miss.
        picked: list[Candidate] = []
        for row in near[:1] + sorted(near[1:], key=decision.simplicity):
            candidate = Candidate(row.method, row.depth, row.concurrency, row.draft)
            if candidate not in picked and len(picked) < MAX_FINALISTS:
                picked.append(candidate)
        best_predicted = _best_predicted(predicted or {}, concurrency, incumbent, least, slo, picked)
        if best_predicted is not None:
            picked.append(best_predicted)
        if (floor or zero) and max(pool, key=lambda row: row.tokens_per_s).method == decision.BASELINE:
            picked += [c for c in _floors(screened, concurrency, floor, zero) if c not in picked]
        chosen[concurrency] = picked
    return chosen


def _floors(screened: Sequence[TrialRow], concurrency: int, floor: Callable[[Candidate], int] | None,
            zero: Callable[[Candidate], bool] | None) -> list[Candidate]:
    """What the server of every screened configuration (method and draft, at any concurrency) runs
    at ``concurrency`` where none leads, when that must be measured: depth 1 where its engine cannot
    switch it off (``floor``), depth 0 (K = 0) where it can but pays for it (``zero``)."""
    series = sorted({(row.method, row.draft) for row in screened if row.method != decision.BASELINE},
                    key=lambda key: (key[0], key[1] or ""))
    found = []
    for method, draft in series:
        one = Candidate(method, 1, concurrency, draft)
        if floor is not None and floor(one) >= 1:
            found.append(one)
        elif zero is not None and zero(one):
            found.append(Candidate(method, 0, concurrency, draft))
    return found


def _best_predicted(predicted: Mapping[Candidate, Prediction], concurrency: int, leader: float, least: float,
                    slo: Any, picked: Sequence[Candidate]) -> Candidate | None:
    """The highest prediction at ``concurrency`` not in ``picked`` whose optimistic bound reaches
    ``leader`` and whose predicted latencies miss the SLOs by no more than the screened pool does."""
    reaching = [(prediction.tokens_per_s, candidate) for candidate, prediction in predicted.items()
                if candidate.concurrency == concurrency and candidate not in picked
                and prediction.bound(GUIDE_Z)[1] >= leader and slo.violation(prediction) <= least]
    return max(reaching, key=lambda entry: entry[0])[1] if reaching else None


@dataclass(frozen=True)
class ConfirmedConcurrency:
    """One concurrency's protocol result, or why it could not be measured."""

    concurrency: int
    candidates: list[Candidate]
    result: ProtocolResult | None
    failure: str | None = None
    implausible: str | None = None
    loads: int = 0  # engine builds / model loads its protocol runs cost, failed attempts included
    out_of_time: bool = False  # not measured (or nothing kept): the study's time budget ran out


@dataclass(frozen=True)
class ConfirmRun:
    """How the finalists are measured: each candidate's ``engine_config``, the ``workload``, the
    ``seed`` and the protocol ``options`` (racing is turned on); a failed concurrency is measured
    up to ``attempts`` times in all; nothing new starts after ``deadline``. ``progress`` gets a
    line per concurrency, ``notice`` one per round the protocol discards, as it happens."""

    engine_config: Callable[[Candidate], EngineConfig]
    workload: Any
    seed: int
    options: ProtocolOptions
    progress: Callable[[str], None] = lambda _text: None
    attempts: int = 1
    deadline: Deadline | None = None
    notice: Callable[[str], None] | None = None


def confirm(worker: EngineWorker, finalists_by_concurrency: dict[int, list[Candidate]],
            how: ConfirmRun) -> list[ConfirmedConcurrency]:
    """Measure every concurrency's finalists with the protocol (see :class:`ConfirmRun`), then
    re-measure once the concurrency levels whose baseline fails the neighbour check (module doc)."""
    deadline = how.deadline or Deadline.start(None)
    engine_config, attempts = how.engine_config, how.attempts

    def run(concurrency: int, later: Sequence[int] = ()) -> ConfirmedConcurrency:
        candidates = finalists_by_concurrency[concurrency]
        loads_before = worker.loads
        # An engine that keeps several spares what this and the later concurrency levels run (module doc).
        worker.keep([EngineConfig(BASELINE_METHOD)] + [engine_config(c) for b in (concurrency, *later)
                                                       for c in finalists_by_concurrency[b]])
        for attempt in range(1, attempts + 1):
            if deadline.passed():
                return ConfirmedConcurrency(concurrency, candidates, None, out_of_time=True)
            again = f" (attempt {attempt} of {attempts})" if attempt > 1 else ""
            how.progress(f"confirming {len(candidates)} finalist(s) and the baseline at concurrency "
                         f"{concurrency}{again}")
            try:
                result = worker.measure_repeatedly([engine_config(c) for c in candidates], how.workload, concurrency,
                                                   seed=how.seed, options=replace(how.options, race=True,
                                                                                  budget_s=deadline.left_s()),
                                                   notice=how.notice)
                return ConfirmedConcurrency(concurrency, candidates, result, loads=worker.loads - loads_before)
            except WorkerFailure as failure:
                if deadline.passed():  # the protocol kept no round before the budget ran out
                    return ConfirmedConcurrency(concurrency, candidates, None, failure.reason, out_of_time=True)
                reason = failure.reason + (f" (failed {attempt} times)" if attempt > 1 else "")
                if failure.kind not in TRANSIENT_FAILURES:
                    break  # it would fail the same way again
        return ConfirmedConcurrency(concurrency, candidates, None, reason, loads=worker.loads - loads_before)

    order = sorted(finalists_by_concurrency)
    batches = {b: run(b, order[i + 1:]) for i, b in enumerate(order)}
    for concurrency in _suspects(batches):
        earlier = batches[concurrency].loads
        again = run(concurrency)
        if not again.out_of_time:  # a second look cut short by the deadline leaves the first standing
            batches[concurrency] = replace(again, loads=earlier + again.loads)
    suspects = implausible_baselines(_baseline_figures(batches))
    return [replace(b, implausible=suspects.get(b.concurrency)) for b in batches.values()]


def _baseline_figures(batches: dict[int, ConfirmedConcurrency]) -> dict[int, float]:
    return {b: batch.result.baseline.measurement.tokens_per_s for b, batch in batches.items()
            if batch.result is not None and batch.result.baseline is not None}


def _suspects(batches: dict[int, ConfirmedConcurrency]) -> list[int]:
    return sorted(implausible_baselines(_baseline_figures(batches)))


def row_fields(measured: RepeatedMeasurement) -> dict[str, Any]:
    """What :func:`autotune.store.results.record_trial` stores for one confirmed configuration."""
    speedup = measured.speedup
    return {
        "measurement": measured.measurement.to_dict(),
        "repetitions": measured.repetitions,
        "intervals": {name: estimate.to_dict() for name, estimate in measured.estimates.items()},
        "speedup": speedup.value if speedup is not None else (1.0 if measured.config.method == "none" else None),
        "extra": {
            "samples": measured.samples, "rounds": measured.rounds, "noise": measured.noise,
            "capped": measured.capped, "dropped": measured.dropped, "noisy": measured.noisy,
        },
    }
