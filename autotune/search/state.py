"""The state of one worker's run of a study: created once, by :func:`start_study`, then read and
written by each phase of :func:`autotune.search.tuner.run_study`.

Inputs: the study setup and the tune options, the open database and Optuna storage, the progress
callback. Output: a :class:`Study`, holding the Optuna study (the ledger, :mod:`autotune.search.ledger`),
our study row's id, the worker every phase measures with, the study's performance model and the
deadline of the whole run, plus what the run keeps as it goes (the trials it ran, its notes).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from optuna.storages import RDBStorage
from sqlalchemy import select

from autotune.engines.base import EngineConfig
from autotune.engines.registry import engine_adapter
from autotune.engines.worker import EngineWorker
from autotune.search import budget, guide, screening
from autotune.search.deadline import Deadline
from autotune.search.ledger import Ledger
from autotune.search.modeling import StudyModeling
from autotune.search.options import TuneOptions
from autotune.search.outcome import TuneProgress
from autotune.search.setup import StudySetup
from autotune.search.space import Candidate
from autotune.search.study import open_study
from autotune.store import Database, results
from autotune.store.locks import named_lock
from autotune.store.tables import ModelRecord

Progress = Callable[[TuneProgress], None]


@dataclass
class Study:
    """One worker's run of a study (see the module doc)."""

    setup: StudySetup
    options: TuneOptions
    database: Database
    ledger: Ledger
    study_id: int  # our study row
    worker: EngineWorker
    modeling: StudyModeling
    draft_ids: dict[str, int]  # draft label -> its model row
    asking: budget.Asking
    deadline: Deadline  # the whole run: timings, screening, confirmation
    progress: Progress
    explore: random.Random  # draws the untried point a sampler that only repeats itself gets
    machine: screening.MachineLoad = field(default_factory=screening.MachineLoad)  # does other load persist?
    last: Candidate | None = None  # the configuration this worker measured last (the guide keeps it loaded)
    pick: guide.Pick | None = None  # the model-guided search's latest proposal
    trials_run: int = 0
    notes: list[str] = field(default_factory=list)  # what this run could not do (TuneResult.notes)

    @contextmanager
    def lock(self) -> Iterator[None]:
        """The study's database lock, shared by every worker of the study."""
        with named_lock(self.database.engine, self.setup.name):
            yield

    def rows(self) -> list[results.TrialRow]:
        """Every stored row of the study (screening trials, then confirmation rows)."""
        with self.database.session() as session:
            return results.study_rows(session, self.study_id)

    def guidance(self, rows: list[results.TrialRow]) -> guide.Guidance:
        """What the model-guided search and the predictions rest on: ``rows`` that were not measured
        under a disturbance (:func:`screening.undisturbed`), and the performance model of them."""
        measured = screening.undisturbed(rows)
        return guide.Guidance(self.modeling.model(measured), measured)

    def engine_config(self, candidate: Candidate) -> EngineConfig:
        return candidate.engine_config(self.setup.draft_engine_args)

    def feasible(self, candidate: Candidate) -> bool:
        return self.setup.infeasibility(candidate) is None

    def status(self, spent: bool) -> str:
        """complete once nothing is left to ask for (``spent``) and every trial finished; else running."""
        return "complete" if spent and budget.all_finished(self.ledger.trials()) else "running"

    def set_status(self, status: str) -> None:
        with self.database.session() as session:
            results.set_study_status(session, self.study_id, status)

    def say(self, text: str, kind: str = "phase") -> None:
        """Progress that is not a trial: a phase (timings, confirmation) or a note within one."""
        self.progress(self._progress(text, kind=kind))

    def note(self, text: str) -> None:
        """A line for the summary that the progress shows at once too."""
        self.notes.append(text)
        self.say(text)

    def report(self, label: str, finished: str | None, reason: str | None = None, best: str | None = None,
               tokens_per_s: float | None = None, predicted: float | None = None) -> None:
        """Progress of one trial: started (``finished`` None) or finished in that state."""
        self.progress(self._progress(label, finished, reason, best, tokens_per_s=tokens_per_s,
                                     predicted_tokens_per_s=predicted))

    def _progress(self, *args: Any, **kwargs: Any) -> TuneProgress:
        done = budget.finished_count(self.ledger.trials())
        return TuneProgress(done, self.setup.n_trials, *args, builds=self.worker.loads, **kwargs)


def start_study(setup: StudySetup, options: TuneOptions, database: Database, storage: RDBStorage,
                progress: Progress | None = None) -> Study:
    """Open (or create) the study of ``setup`` and this worker's state of it; nothing is measured."""
    deadline = Deadline.start(options.timeout_s)
    study_id, optuna_study = open_study(database, storage, setup, setup.sampler.optuna_sampler(options.seed))
    asking = budget.Asking(setup.n_trials, setup.planned(), setup.planned_only, setup.space, options.retries)
    return Study(
        setup=setup, options=options, database=database, ledger=Ledger.of(optuna_study, storage), study_id=study_id,
        worker=EngineWorker(setup.engine_spec, timeout_s=options.trial_timeout),
        modeling=StudyModeling(setup, database, study_id), draft_ids=_draft_ids(setup, database), asking=asking,
        deadline=deadline, progress=progress or (lambda _update: None), explore=random.Random(options.seed),
        machine=screening.MachineLoad(can_limit=engine_adapter(setup.engine).limits_threads),
    )


def _draft_ids(setup: StudySetup, database: Database) -> dict[str, int]:
    fingerprints = {label: draft.fingerprint for label, draft in setup.drafts.items()}
    with database.session() as session:
        query = select(ModelRecord.fingerprint, ModelRecord.id).where(
            ModelRecord.fingerprint.in_(fingerprints.values())
        )
        by_fingerprint = {fingerprint: record_id for fingerprint, record_id in session.execute(query)}
    return {label: by_fingerprint[fingerprint] for label, fingerprint in fingerprints.items()}
