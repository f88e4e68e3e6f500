"""The tuning study as a pipeline of phases over one :class:`~autotune.search.state.Study`:

1. **time the step costs** (once per key, under the study lock, so concurrent workers time them
   once: :mod:`autotune.search.modeling`);
2. **screen**: Optuna trials, one pass each (:mod:`autotune.search.trials`, asking within the
   study-wide budget: :mod:`autotune.search.asking`, :mod:`autotune.search.budget`);
3. **confirm** the finalists with the full protocol, once every trial finished
   (:mod:`autotune.search.confirmation`);
4. **decide and store**: the analysis and the deployment profile (:mod:`autotune.search.profile`),
   recomputed after every trial and after the confirmation;

then the :class:`TuneResult`. One worker measures throughout, so the engines it built serve every
phase where the engine keeps them (:mod:`autotune.engines.worker`). The Optuna study is the ledger
of the trials (:mod:`autotune.search.ledger`): several workers, on one machine or several, run one
study by running :func:`tune` with the same options and database, and a study stopped by Ctrl-C, a
kill or a lost connection is continued by running it again.

**Time budget** (``--timeout``): one deadline for the step timings, the screening and the
confirmation (:mod:`autotune.search.deadline`); what the confirmation could not measure in time is
said in one line of the summary (and of the progress).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import optuna

from autotune.search import budget, guide, profile
from autotune.search.confirmation import confirm_study
from autotune.search.options import TuneOptions
from autotune.search.outcome import TuneProgress, TuneResult
from autotune.search.setup import set_up_study
from autotune.search.state import Study, start_study
from autotune.search.study import optuna_storage, storage_errors
from autotune.search.trials import screen_trials
from autotune.store import open_database, results
from autotune.store.locks import named_lock
from autotune.store.tables import StudyRecord

OPTUNA_SCHEMA_LOCK = "optuna-schema"


def tune(options: TuneOptions, progress: Callable[[TuneProgress], None] | None = None) -> TuneResult:
    """Run (or continue) a tuning study and return its result; see :class:`TuneOptions`.

    Every option is validated, the hardware probed and the models read before the database is
    written. Raises ConfigurationError for bad options or a study name used with other options.
    """
    setup = set_up_study(options)
    # A lost database connection (server restarted mid-study) ends the run with one line saying so.
    with open_database(options.db_url) as database, _quiet_optuna(), storage_errors(database):
        with named_lock(database.engine, OPTUNA_SCHEMA_LOCK):  # workers starting together race to create its tables
            storage = optuna_storage(database, options)
        try:
            study = start_study(setup, options, database, storage, progress)
            with study.worker:
                return run_study(study)
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


def run_study(study: Study) -> TuneResult:
    """Run the phases (module doc) and return the result of this run."""
    with study.lock():  # concurrent workers time the step costs once
        study.modeling.prepare(study.worker, study.machine, study.say)
    study.set_status("running")
    spent = screen_trials(study)  # the budget (or the planned points) ran out, rather than the time
    status = _settle(study, spent)
    if study.options.confirm and budget.all_finished(study.ledger.trials()):
        status = confirm_study(study, spent) or status
    return _result(study, status, time.monotonic() - study.deadline.started)


def _settle(study: Study, spent: bool) -> str:
    """Store the study's status, except over a study another worker is confirming (that worker
    settles it when done)."""
    status = study.status(spent)
    with study.database.session() as session:
        if session.get(StudyRecord, study.study_id).status != "confirming":
            results.set_study_status(session, study.study_id, status)
    return status


def _result(study: Study, status: str, elapsed_s: float) -> TuneResult:
    setup, rows = study.setup, study.rows()
    analysis = profile.analyse(study, rows)
    note = ""
    if setup.sampler.guided and status == "complete":
        guidance = study.guidance(rows)  # what the guide decided on (asking.py)
        note = guide.ruled_out(setup.space, guidance, study.feasible, setup.objective.slo).sentence()
    return TuneResult(
        study_name=setup.name, database=study.database.display_url, status=status,
        objective=setup.objective.kind, slo=setup.objective.slo.to_dict(), n_trials=setup.n_trials,
        hardware=setup.hardware.name, search_space=setup.search_space_record(), analysis=analysis,
        trials_this_run=study.trials_run, worker_starts=study.worker.starts, model_loads_this_run=study.worker.loads,
        elapsed_s=elapsed_s, rows=rows, sampler=setup.sampler, notes=list(study.notes), search_note=note,
    )
