"""The tuning loop: Optuna ask/tell around isolated engine measurements.

Per trial, under the study lock: fail stale trials, ask within the study-wide budget (see
:mod:`autotune.search.budget`) and draw the candidate. A candidate that already finished in this
study is a repeat: Optuna gets the latest result back at once and the worker asks again (TPE
repeats itself a lot once it converges on a small discrete space). Then, outside the lock, with a
heartbeat running:

1. a candidate that does not fit (memory, sequence length) is never launched: it is stored as
   ``infeasible`` with the reason and told to Optuna as PRUNED, so samplers learn to avoid the
   region without treating it as a crash;
2. otherwise the isolated worker measures it; an engine failure (timeout, crash, out of memory,
   unsupported) is stored as ``failed`` with its reason and told as FAIL.

**Retries** (``--retry-failed N``, default 1). A configuration whose measurement failed in a way that
can pass (the worker crashed, hung past the trial timeout or ran out of memory) is measured again,
at most N more times, each time as a new trial:

* a baseline (method none) as soon as no other baseline is waiting to be measured first: every
  speedup at its concurrency is measured against it;
* any other configuration only once nothing untried is left (the grid done, the model-guided
  search out of proposals, a sampler that only repeats itself): an untried point tells more than a
  second look at one that failed, and a failure that repeats costs its timeout again. Until then a
  sampler proposing it again gets the failure back, like any finished configuration.

Infeasible configurations and failures that say something about the configuration itself
(unsupported, engine error, an unusable measurement) are never retried: they would fail again. A
retry is a measured trial and counts against the budget; its row's ``extra`` holds ``attempt`` (2
for the first retry) and ``retry_of`` (the failed trial it measures again), and the progress shows
both. N = 0 keeps every failure final.

**Disturbed passes.** Each trial's pass gets the protocol's disturbance check and is measured
again while other processes disturb it (:mod:`autotune.search.screening`); a row that stayed
disturbed never guides the model-guided search.

**Time budget** (``--timeout``): one deadline for the step timings, the screening and the
confirmation (:mod:`autotune.search.deadline`); what the confirmation could not measure in time is
said in one line of the summary (and of the progress).

Our row is written before Optuna is told, so a kill -9 never loses a finished trial (at worst a
trial whose row exists is retried under a new number). Ctrl-C kills the worker, fails the running
trial with ``autotune_state = interrupted``, re-queues it for the next run, and re-raises
KeyboardInterrupt. The deployment profile is recomputed after every trial, so it can be read while
the study runs.
"""

from __future__ import annotations

import random
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState
from sqlalchemy import select

from autotune.analysis import decision
from autotune.analysis.offstate import OFF_STATE_KEY
from autotune.periodic import repeating
from autotune.engines.base import EngineConfig
from autotune.engines.worker import EngineWorker, WorkerFailure
from autotune.search import budget, confirm, guide, screening
from autotune.search.budget import ATTEMPT_ATTR, FAILURE_ATTR, RETRY_OF_ATTR, STATE_ATTR
from autotune.search.deadline import Deadline
from autotune.search.modeling import StudyModeling
from autotune.search.options import TuneOptions
from autotune.search.plan import StudyPlan, plan_study
from autotune.search.outcome import StudyAnalysis, TuneProgress, TuneResult
from autotune.search.space import BASELINE_METHOD, Candidate, SearchSpace
from autotune.search.study import open_study, optuna_storage, storage_errors
from autotune.store import Database, open_database, results
from autotune.store.locks import named_lock
from autotune.store.models import ModelRecord, StudyRecord

REASON_ATTR = "autotune_reason"
OPTUNA_SCHEMA_LOCK = "optuna-schema"
LABEL_ATTR = "config"
OPTUNA_STATE = {"complete": TrialState.COMPLETE, "infeasible": TrialState.PRUNED, "failed": TrialState.FAIL}
MAX_REPEATS = 5  # repeats in a row before a random untried configuration is enqueued


@dataclass(frozen=True)
class TrialOutcome:
    """How a trial ended: ``state`` complete | failed | infeasible; the measurement when complete."""

    state: str
    reason: str | None = None
    measurement: dict[str, Any] | None = None
    values: list[float] | None = None
    constraints: dict[str, float] | None = None
    failure_kind: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # stored in the row's extra (disturbed passes)


def tune(options: TuneOptions, progress: Callable[[TuneProgress], None] | None = None) -> TuneResult:
    """Run (or continue) a tuning study and return its result; see :class:`TuneOptions`.

    Every option is validated, the hardware probed and the models read before the database is
    written. Raises ConfigurationError for bad options or a study name used with other options.
    """
    plan = plan_study(options)
    # A lost database connection (server restarted mid-study) ends the run with one line saying so.
    with open_database(options.db_url) as database, _quiet_optuna(), storage_errors(database):
        with named_lock(database.engine, OPTUNA_SCHEMA_LOCK):  # workers starting together race to create its tables
            storage = optuna_storage(database, options)
        try:
            return Tuner(plan, options, database, storage, progress).run()
        finally:
            storage.remove_session()
            storage.engine.dispose()


@contextmanager
def _quiet_optuna() -> Iterator[None]:
    """Optuna logs every trial at INFO; progress is ours to report."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(verbosity)


class Tuner:
    """One worker of a study (see the module docstring)."""

    def __init__(
        self,
        plan: StudyPlan,
        options: TuneOptions,
        database: Database,
        storage: RDBStorage,
        progress: Callable[[TuneProgress], None] | None = None,
    ) -> None:
        self.plan = plan
        self.options = options
        self.database = database
        self.storage = storage
        self.progress = progress or (lambda _update: None)
        self.worker = EngineWorker(plan.engine_spec, timeout_s=options.trial_timeout)
        self.trials_run = 0
        self.machine = screening.MachineLoad()  # whether other processes' load persists (screening.py)
        self.last: Candidate | None = None  # the configuration this worker measured last (the guide keeps it loaded)
        self.pick: guide.Pick | None = None
        self.deadline = Deadline.start(options.timeout_s)  # the whole study: timings, screening, confirmation
        self.notes: list[str] = []  # what this run could not do (TuneResult.notes)

    def run(self) -> TuneResult:
        """Time the step costs (once per key), screen, then confirm: one worker throughout, so the
        engines it built serve every phase where the engine keeps them (:mod:`autotune.engines.worker`)."""
        with self.worker:
            return self._run()

    def _run(self) -> TuneResult:
        self.study_id, self.study = open_study(self.database, self.storage, self.plan,
                                               self.plan.sampler.optuna_sampler(self.options.seed))
        self.draft_ids = self._draft_ids()
        self.modeling = StudyModeling(self.plan, self.database, self.study_id)
        with named_lock(self.database.engine, self.plan.name):  # concurrent workers time the step costs once
            self.modeling.prepare(self.worker, self._say)
        self.planned = self.plan.planned()
        self.explore = random.Random(self.options.seed)
        with self.database.session() as session:
            results.set_study_status(session, self.study_id, "running")
        trial: optuna.Trial | None = None
        spent = False  # the budget (or the planned points) ran out, rather than the time
        try:
            while self.deadline.in_time():
                trial, candidate = self._ask()
                if trial is None:
                    spent = True
                    break
                self._run_trial(trial, candidate)
                trial = None
        except BaseException as exc:
            self._abandon(trial, interrupted=isinstance(exc, KeyboardInterrupt))
            raise
        status = self._settle(spent)
        if self.options.confirm and budget.all_finished(self.study.get_trials(deepcopy=False)):
            status = self._confirm(spent) or status
        return self._result(status, time.monotonic() - self.deadline.started)

    # -- one trial --------------------------------------------------------------------------------

    def _ask(self) -> tuple[optuna.Trial | None, Candidate | None]:
        """The next trial to measure and its candidate, or (None, None) when nothing is left.

        Under the study lock: repeats of finished configurations are answered on the spot; after
        MAX_REPEATS of them in a row, a random untried configuration is enqueued instead."""
        with named_lock(self.database.engine, self.plan.name):
            budget.fail_stale_trials(self.study)
            for attempt in range(MAX_REPEATS + 1):
                explore = self.explore if attempt == MAX_REPEATS else None
                trial = budget.ask_within_budget(
                    self.study, self.plan.n_trials, self.planned, self.plan.planned_only, explore, self.plan.space,
                    self._guided if self.plan.sampler.guided else None, self.options.retries,
                )
                if trial is None:
                    return None, None
                # A trial without any heartbeat is never found stale: beat once before anything can fail.
                self.storage.record_heartbeat(trial._trial_id)
                budget.claim(self.study, trial)
                candidate = self.plan.space.suggest(trial)  # inside the lock: other workers see the pick
                trial.set_user_attr(LABEL_ATTR, candidate.label)
                earlier = None if RETRY_OF_ATTR in trial.user_attrs else self._finished_before(trial.number, candidate)
                if earlier is None:
                    return trial, candidate
                self._replay(trial, earlier)
        raise AssertionError("an explored candidate is untried, so it cannot repeat")  # pragma: no cover

    def _guided(self, taken: list[dict[str, Any]]) -> Candidate | None:
        """The model-guided next point (:mod:`autotune.search.guide`); None ends the study."""
        with self.database.session() as session:
            rows = screening.undisturbed(results.study_rows(session, self.study_id))
        self.pick = guide.next_pick(self.plan.space, self.modeling.model(rows), rows, taken, self._feasible,
                                    self.plan.objective.slo, self.last, explore_beyond=self.options.explore_beyond)
        if self.pick is None:
            return None
        # A worker that keeps several engines spares those of points still open and of the leaders,
        # and the baseline's, which every concurrency's confirmation runs.
        self.worker.keep(dict.fromkeys([EngineConfig(BASELINE_METHOD)]
                                       + [self._engine_config(c) for c in self.pick.wanted]))
        return self.pick.candidate

    def _feasible(self, candidate: Candidate) -> bool:
        return self.plan.infeasibility(candidate) is None

    def _prediction(self, candidate: Candidate) -> dict[str, Any] | None:
        """What the model predicts for ``candidate`` before it is measured (stored next to it)."""
        if self.pick is not None and self.pick.candidate == candidate and self.pick.prediction is not None:
            return self.pick.prediction.to_dict()
        with self.database.session() as session:
            rows = screening.undisturbed(results.study_rows(session, self.study_id))
        prediction = self.modeling.predict(candidate, rows)
        return None if prediction is None else prediction.to_dict()

    def _run_trial(self, trial: optuna.Trial, candidate: Candidate) -> None:
        retry = {key: trial.user_attrs[key] for key in (ATTEMPT_ATTR, RETRY_OF_ATTR) if key in trial.user_attrs}
        label = candidate.label + (f" (attempt {retry[ATTEMPT_ATTR]}, retrying trial {retry[RETRY_OF_ATTR]})"
                                   if retry else "")
        with heartbeat(self.storage, trial._trial_id):
            self._report(label, None)
            prediction = self._prediction(candidate)
            loads_before = self.worker.loads
            outcome = self._outcome(candidate, screening.surprise_floor(prediction))
            extra = {"model_loads": self.worker.loads - loads_before, "optuna_trial_id": trial._trial_id, **retry,
                     **outcome.extra}
            if outcome.failure_kind is not None:
                extra["failure"] = outcome.failure_kind
            with self.database.session() as session:
                record = results.record_trial(
                    session, self.study_id, trial_number=trial.number, method=candidate.method,
                    depth=candidate.depth, concurrency=candidate.concurrency, state=outcome.state,
                    draft=candidate.draft, draft_model_id=self.draft_ids.get(candidate.draft), reason=outcome.reason,
                    measurement=outcome.measurement, extra=extra, prediction=prediction,
                )
                row = results.trial_row(record)
            self.modeling.record_acceptance(row, self.draft_ids.get(candidate.draft))
            self._tell(trial, outcome)
        self.trials_run += 1
        self.last = candidate
        analysis = self._store_profile()
        figure = (outcome.measurement or {}).get("tokens_per_s")
        predicted = (prediction or {}).get("tokens_per_s", {}).get("value")
        self._report(label, outcome.state, outcome.reason, analysis.best_label, figure, predicted)

    def _outcome(self, candidate: Candidate, floor: float | None) -> TrialOutcome:
        """Screen ``candidate`` once (:func:`screening.screen`; a quiet pass below ``floor`` tokens/s is
        measured again)."""
        reason = self.plan.infeasibility(candidate)
        if reason is not None:
            return TrialOutcome("infeasible", reason)
        config = candidate.engine_config(self.plan.draft_engine_args)
        try:
            screened = screening.screen(
                lambda: self.worker.measure_pass(config, self.plan.workload, candidate.concurrency,
                                                 seed=self.options.seed or 0),
                lambda text: self._say(f"{candidate.label}: {text}", kind="note"), self.deadline.in_time,
                floor=floor, machine=self.machine,
            )
        except WorkerFailure as failure:
            return TrialOutcome("failed", failure.reason, failure_kind=failure.kind)
        measurement, objective = screened.measurement, self.plan.objective
        try:
            values = objective.values(measurement)
        except ValueError as exc:
            return TrialOutcome("failed", str(exc), failure_kind="objective", extra=screened.extra())
        return TrialOutcome("complete", None, measurement.to_dict(), values, objective.constraints(measurement),
                            extra=screened.extra())

    def _finished_before(self, number: int, candidate: Candidate) -> optuna.trial.FrozenTrial | None:
        """The latest earlier trial of the same candidate that finished with a result of ours (after
        a retry, the retry's result stands). Ours and Optuna's state must agree: a trial whose tell
        was cut off after our state was set (a lost connection) was failed as stale by Optuna, with no
        values, and has no result to replay."""
        params = SearchSpace.params(candidate)
        earlier = [trial for trial in self.study.get_trials(deepcopy=False, states=budget.FINISHED)
                   if trial.number != number and OPTUNA_STATE.get(trial.user_attrs.get(STATE_ATTR)) == trial.state
                   and trial.params == params]
        return max(earlier, key=lambda trial: trial.number, default=None)

    def _replay(self, trial: optuna.Trial, earlier: optuna.trial.FrozenTrial) -> None:
        """Answer a repeat with the earlier trial's result; it is not measured nor stored by us."""
        trial.set_user_attr(budget.REPEAT_ATTR, earlier.number)
        state = earlier.user_attrs[STATE_ATTR]
        outcome = TrialOutcome(
            state, earlier.user_attrs.get(REASON_ATTR), None, list(earlier.values) if earlier.values else None,
            dict(earlier.constraints), earlier.user_attrs.get(FAILURE_ATTR),
        )
        self._tell(trial, outcome)

    def _tell(self, trial: optuna.Trial, outcome: TrialOutcome) -> None:
        trial.set_user_attr(STATE_ATTR, outcome.state)
        if outcome.reason:
            trial.set_user_attr(REASON_ATTR, outcome.reason)
        if outcome.failure_kind:
            trial.set_user_attr(FAILURE_ATTR, outcome.failure_kind)
        for name, value in (outcome.constraints or {}).items():
            trial.set_constraint(name, value)
        state = OPTUNA_STATE[outcome.state]
        self.study.tell(trial, outcome.values if state == TrialState.COMPLETE else None, state=state)

    # -- interruption, completion, results --------------------------------------------------------

    def _abandon(self, trial: optuna.Trial | None, interrupted: bool) -> None:
        """Ctrl-C or an unexpected error: stop the worker, fail the running trial and queue it
        again for the next run; after Ctrl-C the study is marked interrupted."""
        self.worker.stop(force=True)
        try:
            if trial is not None and self.storage.get_trial(trial._trial_id).state == TrialState.RUNNING:
                # Under the study lock, as budget.requeue_unresolved_failures, which completes a
                # re-queue cut off here: between the two, the retry is queued once.
                with named_lock(self.database.engine, self.plan.name):
                    trial.set_user_attr(STATE_ATTR, "interrupted" if interrupted else "abandoned")
                    self.study.tell(trial, state=TrialState.FAIL)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                        RetryHeartbeatStaleTrialCallback(max_retry=self.options.max_retry)(
                            self.study, self.storage.get_trial(trial._trial_id)
                        )
            if interrupted:
                with self.database.session() as session:
                    results.set_study_status(session, self.study_id, "interrupted")
        except Exception:  # noqa: BLE001 - the original error matters; heartbeats fail the trial later
            pass

    def _status(self, spent: bool) -> str:
        """complete once nothing is left to ask for and every trial finished; else running."""
        return "complete" if spent and budget.all_finished(self.study.get_trials(deepcopy=False)) else "running"

    def _settle(self, spent: bool) -> str:
        """Store :meth:`_status`, except over a study another worker is confirming (that worker
        settles it when done)."""
        status = self._status(spent)
        with self.database.session() as session:
            if session.get(StudyRecord, self.study_id).status != "confirming":
                results.set_study_status(session, self.study_id, status)
        return status

    # -- confirmation ---------------------------------------------------------------------------------

    def _confirm(self, spent: bool) -> str | None:
        """Re-measure the finalists with the full protocol (:mod:`autotune.search.confirm`) unless
        the screening trials as they stand were confirmed already, or another worker is at it.

        The claim (status ``confirming``) and the write both happen under the study lock, and the
        write checks again that nobody stored a confirmation of the same trials meanwhile: two
        workers finishing together measure at worst twice, but store once. Returns the status it
        leaves, None when it did not confirm. That status is worked out afresh at the end: the
        other workers that finished meanwhile left it to this one."""
        with named_lock(self.database.engine, self.plan.name), self.database.session() as session:
            rows = results.study_rows(session, self.study_id)
            screened = len(decision.screening_rows(rows))
            if not screened or _confirmed(rows, screened) or session.get(StudyRecord, self.study_id).status == "confirming":
                return None
            results.set_study_status(session, self.study_id, "confirming")
        try:
            batches = self._measure_finalists(rows)
            with named_lock(self.database.engine, self.plan.name), self.database.session() as session:
                latest = results.study_rows(session, self.study_id)
                if not _confirmed(latest, screened):
                    self._record_confirmation(session, latest, screened, batches)
        finally:
            status = self._status(spent)
            with self.database.session() as session:
                results.set_study_status(session, self.study_id, status)
        self._store_profile()
        return status

    def _engine_config(self, candidate: Candidate) -> EngineConfig:
        return candidate.engine_config(self.plan.draft_engine_args)

    def _measure_finalists(self, rows: list[results.TrialRow]) -> list[confirm.ConfirmedConcurrency]:
        measured = screening.undisturbed(rows)  # what the model and its predictions rest on, as in _guided
        predicted = guide.point_predictions(self.plan.space, self.modeling.model(measured), self._feasible)
        chosen = confirm.finalists(rows, self.plan.space.concurrencies, self.plan.objective.slo, predicted,
                                   self.plan.off_floor, self.plan.zero_to_measure)
        batches = confirm.confirm(self.worker, chosen, self._engine_config, self.plan.workload, self.options.seed or 0,
                                  # under a load that persists, disturbed rounds are kept at once (screening.py)
                                  replace(self.options.protocol, measure_under_load=self.machine.persists),
                                  self._say, 1 + self.options.retries, self.deadline,
                                  lambda text: self._say(text, kind="note"))
        unconfirmed = [batch.concurrency for batch in batches if batch.out_of_time]
        if unconfirmed:
            self._note(_out_of_time_note(self.options.timeout_s, unconfirmed, len(unconfirmed) == len(batches)))
        return batches

    def _say(self, text: str, kind: str = "phase") -> None:
        """Progress that is not a trial: a phase (timings, confirmation) or a note within one."""
        done = budget.finished_count(self.study.get_trials(deepcopy=False))
        self.progress(TuneProgress(done, self.plan.n_trials, text, kind=kind, builds=self.worker.loads))

    def _note(self, text: str) -> None:
        """A line for the summary that the progress shows at once too."""
        self.notes.append(text)
        self._say(text)

    def _record_confirmation(self, session: Any, rows: list[results.TrialRow], screened: int,
                             batches: list[confirm.ConfirmedConcurrency]) -> None:
        """Store one confirmation run: a row per measured configuration (the baseline included), or a
        failed row for a concurrency whose worker failed."""
        runs = [row.extra.get("confirmation") or {} for row in rows if row.phase == "confirmation"]
        run = {"run": max((r.get("run", 0) for r in runs), default=0) + 1, "screened": screened}
        unconfirmed = [batch.concurrency for batch in batches if batch.out_of_time]
        if unconfirmed:
            run["unconfirmed"] = unconfirmed  # out of time: the run is partial and the next run confirms again
        number = max((row.trial_number for row in rows if row.phase == "confirmation"), default=-1) + 1
        for batch in batches:
            if batch.out_of_time:
                continue
            extra = {"confirmation": {**run, "concurrency": batch.concurrency}}
            loads = {"model_loads": batch.loads}  # on the concurrency's first row: what its protocol built
            if batch.result is None:
                results.record_trial(session, self.study_id, trial_number=number, method="none", depth=0,
                                     concurrency=batch.concurrency, state="failed", reason=batch.failure,
                                     extra={**extra, **loads}, phase="confirmation")
                number += 1
                continue
            # Every measured configuration is a candidate or the baseline; anything else is a bug,
            # not a baseline (a lost off_state flag once stored a K = 0 point as one).
            by_config = {self._engine_config(c): c for c in batch.candidates}
            by_config.setdefault(EngineConfig("none"), Candidate("none", 0, batch.concurrency))
            extra.update(faults=batch.result.faults, rounds_discarded=batch.result.rounds_discarded)
            if batch.implausible:
                extra["implausible"] = batch.implausible
            for measured in batch.result.measurements:
                candidate = by_config[measured.config]
                fields = confirm.row_fields(measured)
                if measured.config.off_state:  # K = 0 inside the server: prices the off state, never decides
                    fields["extra"] = {**fields["extra"], OFF_STATE_KEY: True}
                results.record_trial(
                    session, self.study_id, trial_number=number, method=candidate.method, depth=candidate.depth,
                    concurrency=batch.concurrency, state="complete", draft=candidate.draft,
                    draft_model_id=self.draft_ids.get(candidate.draft), phase="confirmation",
                    measurement=fields["measurement"], repetitions=fields["repetitions"],
                    intervals=fields["intervals"], speedup=fields["speedup"], extra={**extra, **fields["extra"], **loads},
                )
                loads = {}
                number += 1

    def _analysis(self) -> tuple[StudyAnalysis, list[results.TrialRow]]:
        with self.database.session() as session:
            rows = results.study_rows(session, self.study_id)
        method_names = [
            name for method in self.plan.space.methods
            for name in ([f"draft:{d}" if d != "builtin" else "draft" for d in self.plan.space.drafts]
                         if method == "draft" else [method])
        ]
        repeated = budget.repeat_count(self.study.get_trials(deepcopy=False))
        analysis = StudyAnalysis.of(rows, self.plan.objective, list(self.plan.space.concurrencies), method_names, repeated,
                                    self.plan.space.max_depth)
        return analysis, rows

    def _store_profile(self) -> StudyAnalysis:
        with named_lock(self.database.engine, self.plan.name):
            analysis, _rows = self._analysis()
            choice = analysis.profile
            if choice is None:
                return analysis
            row = choice.row
            with self.database.session() as session:
                study = session.get(StudyRecord, self.study_id)
                results.save_profile(
                    session, study, measurement_id=row.measurement_id, method=row.method,
                    draft_model_id=self.draft_ids.get(row.draft), depth=row.depth, concurrency=row.concurrency,
                    tokens_per_s=row.tokens_per_s, tpot_ms_p50=row.tpot_ms_p50, speedup=row.speedup,
                    per_concurrency=[entry.to_dict() for entry in analysis.per_concurrency],
                    repetitions=row.repetitions, intervals=row.intervals,
                    details={
                        "label": row.label, "draft": row.draft, "slo": self.plan.objective.slo.to_dict(),
                        "slo_met": choice.slo_met, "slo_violation": choice.violation, "trial": row.to_dict(),
                        "confirmed": row.confirmed, "phase": row.phase,
                        "tied_with": [decision.config_label(r) for r in choice.decision.tied] if choice.decision else [],
                        "verdict": [entry.to_dict() for entry in analysis.verdict],
                        "pareto_front": [entry.label for entry in analysis.pareto_front],
                        "summary": analysis.summary, "counts": asdict(analysis.counts),
                        "model_loads": analysis.model_loads,
                    },
                )
        return analysis

    def _result(self, status: str, elapsed_s: float) -> TuneResult:
        analysis, rows = self._analysis()
        note = ""
        if self.plan.sampler.guided and status == "complete":
            measured = screening.undisturbed(rows)  # the rows the guide decided on (_guided)
            note = guide.ruled_out(self.plan.space, self.modeling.model(measured), measured, self._feasible,
                                   self.plan.objective.slo).sentence()
        return TuneResult(
            study_name=self.plan.name, database=self.database.display_url, status=status,
            objective=self.plan.objective.kind, slo=self.plan.objective.slo.to_dict(), n_trials=self.plan.n_trials,
            hardware=self.plan.hardware.name, search_space=self.plan.search_space_record(), analysis=analysis,
            trials_this_run=self.trials_run, worker_starts=self.worker.starts, model_loads_this_run=self.worker.loads,
            elapsed_s=elapsed_s, rows=rows, sampler=self.plan.sampler, notes=list(self.notes), search_note=note,
        )

    def _draft_ids(self) -> dict[str, int]:
        fingerprints = {label: draft.fingerprint for label, draft in self.plan.drafts.items()}
        with self.database.session() as session:
            query = select(ModelRecord.fingerprint, ModelRecord.id).where(
                ModelRecord.fingerprint.in_(fingerprints.values())
            )
            by_fingerprint = {fingerprint: record_id for fingerprint, record_id in session.execute(query)}
        return {label: by_fingerprint[fingerprint] for label, fingerprint in fingerprints.items()}

    def _report(self, label: str, finished: str | None, reason: str | None = None, best: str | None = None,
                tokens_per_s: float | None = None, predicted: float | None = None) -> None:
        done = budget.finished_count(self.study.get_trials(deepcopy=False))
        self.progress(TuneProgress(done, self.plan.n_trials, label, finished, reason, best,
                                   tokens_per_s=tokens_per_s, predicted_tokens_per_s=predicted,
                                   builds=self.worker.loads))


def _confirmed(rows: list[results.TrialRow], screened: int) -> bool:
    """True when a complete confirmation run of these ``screened`` screening trials is stored (one
    the time budget cut short does not count: the next run confirms again)."""
    return any((run := row.extra.get("confirmation") or {}).get("screened") == screened and not run.get("unconfirmed")
               for row in rows if row.phase == "confirmation")


def _out_of_time_note(timeout_s: float | None, unconfirmed: list[int], nothing: bool) -> str:
    """The one line saying what the time budget cut from the confirmation."""
    sizes = ", ".join(map(str, unconfirmed))
    left = ("no concurrency was confirmed (the answer rests on the screening passes, or on an earlier confirmation)"
            if nothing else
            f"concurrency(s) {sizes} not confirmed and left out of the answer")
    return (f"The time budget (--timeout {timeout_s:g} s) ran out during the confirmation: {left}; "
            "re-run with the same --study and a longer --timeout to confirm.")


@contextmanager
def heartbeat(storage: RDBStorage, trial_id: int) -> Iterator[None]:
    """Record the trial's heartbeat every interval while the block runs (Study.optimize does the
    same in a thread; with ask/tell it is ours to do)."""
    interval = storage.get_heartbeat_interval()
    if interval is None:
        yield
        return
    def beat() -> None:
        try:
            storage.record_heartbeat(trial_id)
        except Exception:  # noqa: BLE001 - a missed beat is retried; the trial must go on
            pass

    with repeating(beat, interval, name="autotune-heartbeat", at_start=True):
        yield
