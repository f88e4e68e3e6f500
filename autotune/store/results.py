"""Writes and queries of tuning results: studies, one measurement row per finished trial, the model
artifacts they used, and the deployment profile each study recommends.

Plain values in, plain dataclasses out (:class:`TrialRow`, :class:`StudySummary`): no engine,
Optuna or torch types. A trial's speedup is stored as measured: paired with the baseline in the
same rounds (confirmation rows), never computed here against a baseline from another moment, so a
screening trial (one pass) has none.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from autotune.analysis.intervals import Estimate
from autotune.errors import NotFoundError
from autotune.store.rows import get_or_create
from autotune.store.tables import (
    DeploymentProfileRecord,
    HardwareRecord,
    MeasurementRecord,
    ModelRecord,
    StudyRecord,
    utcnow,
)

TRIAL_STATES = ("complete", "failed", "infeasible")
PHASES = ("screening", "confirmation")
STUDY_STATUSES = ("running", "confirming", "complete", "interrupted")
BASELINE_METHOD = "none"
# Measurement fields that have columns of their own; the other fields go to extra["measurement"].
FIGURE_COLUMNS = (
    "tokens_per_s", "requests_per_s",
    "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99",
    "acceptance_rate", "acceptance_length", "acceptance_by_position", "drafted_tokens", "accepted_tokens",
    "peak_memory_bytes", "wall_time_s",
)
CONFIG_FIELDS = ("method", "depth", "concurrency", "draft", "temperature", "seed", "outputs")
# The measurement columns a TrialRow field of the same name holds (the draft model and the row id
# are read apart: a row names its draft by label and fingerprint).
ROW_COLUMNS = (
    "trial_number", "method", "depth", "concurrency", "state", "reason", *FIGURE_COLUMNS,
    "speedup", "phase", "repetitions", "intervals", "prediction", "extra", "created_at",
)


@dataclass(frozen=True, kw_only=True)
class TrialFigures:
    """What a trial measured (None where it was not measured: a failed or infeasible trial), its
    ``extra`` facts and when it was stored; shared by stored rows and exported profiles."""

    tokens_per_s: float | None = None
    requests_per_s: float | None = None
    ttft_ms_p50: float | None = None
    ttft_ms_p90: float | None = None
    ttft_ms_p99: float | None = None
    tpot_ms_p50: float | None = None
    tpot_ms_p90: float | None = None
    tpot_ms_p99: float | None = None
    acceptance_rate: float | None = None
    acceptance_length: float | None = None
    acceptance_by_position: list[float] = field(default_factory=list)
    drafted_tokens: int | None = None
    accepted_tokens: int | None = None
    peak_memory_bytes: int | None = None
    wall_time_s: float | None = None
    speedup: float | None = None
    phase: str = "screening"
    repetitions: int = 1
    intervals: dict[str, Any] = field(default_factory=dict)  # figure name -> Estimate.to_dict()
    # What the performance model predicted before the trial ran (see MeasurementRecord.prediction);
    # None where nothing was predicted.
    prediction: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    created_at: dt.datetime | None = None

    def estimate(self, name: str) -> Estimate | None:
        """The figure ``name`` with its interval; a figure stored without one reads as a single
        run (n = 1); None when it was not measured."""
        if name in self.intervals:
            return Estimate.from_dict(self.intervals[name])
        value = getattr(self, name, None)
        return None if value is None else Estimate.single(value)

    @property
    def confirmed(self) -> bool:
        """Measured with the full protocol (repeated, paired), not a screening pass."""
        return self.phase == "confirmation"


@dataclass(frozen=True, kw_only=True)
class TrialRow(TrialFigures):
    """One finished trial of a study: its configuration, state and figures; the row type of every
    reader of the measurements table (the tuner, listings, profiles, the report).

    A trial is identified by ``(phase, trial_number)``: screening rows carry Optuna's trial
    numbers, confirmation rows a sequence of their own. Its draft model is named twice: ``draft``
    is the tuner's label (``builtin``, or the label the search space gave it), the name
    configurations are written with; ``draft_fingerprint`` is the model's content fingerprint, the
    name that holds across databases. ``extra`` is the stored facts as written (the label included,
    under ``"draft"``).
    """

    trial_number: int
    method: str
    draft: str | None = None
    depth: int
    concurrency: int
    state: str  # complete | failed | infeasible
    reason: str | None = None
    measurement_id: int | None = None
    draft_fingerprint: str | None = None

    @property
    def complete(self) -> bool:
        return self.state == "complete" and self.tokens_per_s is not None

    @property
    def key(self) -> tuple[str, int]:
        """``(phase, trial_number)``: unique within a study."""
        return (self.phase, self.trial_number)

    @property
    def config_label(self) -> str:
        """``none``, ``mtp@2``, ``draft@3`` or ``draft:<label>@3`` (a draft other than the built-in)."""
        if self.method == BASELINE_METHOD:
            return self.method
        name = self.method if self.draft in (None, "builtin") else f"{self.method}:{self.draft}"
        return f"{name}@{self.depth}"

    @property
    def label(self) -> str:
        return f"{self.config_label} c{self.concurrency}"

    def to_dict(self) -> dict[str, Any]:
        """The row as ``autotune trials --json`` lists it: the draft by label (``draft``, not
        repeated in ``extra``), the row's id and its label; no fingerprint."""
        data = asdict(self)
        del data["draft_fingerprint"]
        data["extra"].pop("draft", None)
        data["label"] = self.label
        data["created_at"] = self.created_at.isoformat() if self.created_at else None
        return data


@dataclass(frozen=True)
class StudySummary:
    """A study as ``autotune studies`` lists it."""

    name: str
    status: str
    engine: str
    objective: str
    hardware: str
    target: str
    workload: str
    trials_complete: int
    trials_failed: int
    trials_infeasible: int
    best: str | None  # the deployment profile's configuration label
    best_tokens_per_s: float | None
    best_speedup: float | None
    created_at: dt.datetime
    finished_at: dt.datetime | None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["created_at"] = self.created_at.isoformat()
        data["finished_at"] = self.finished_at.isoformat() if self.finished_at else None
        return data


# -- models and studies -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ModelEntry:
    """The columns of a model-artifact row; ``fingerprint`` (its content) names it."""

    fingerprint: str
    name: str
    role: str
    source: str
    num_params: int | None
    num_mtp_modules: int
    vocab_size: int | None
    config: Mapping[str, Any]


def upsert_model(session: Session, model: ModelEntry) -> ModelRecord:
    """The model row for ``model.fingerprint``, created on first sight (race-free: store/rows.py)."""
    return get_or_create(session, ModelRecord, {"fingerprint": model.fingerprint}, {
        "name": model.name, "role": model.role, "source": model.source, "num_params": model.num_params,
        "num_mtp_modules": model.num_mtp_modules, "vocab_size": model.vocab_size, "config": dict(model.config),
    })


def find_study(session: Session, name: str) -> StudyRecord | None:
    return session.scalar(select(StudyRecord).where(StudyRecord.name == name))


@dataclass(frozen=True, kw_only=True)
class StudyEntry:
    """The columns of a new study row."""

    name: str
    optuna_study_name: str
    hardware: HardwareRecord
    target: ModelRecord
    engine: str
    objective: str
    search_space: Mapping[str, Any]
    slo: Mapping[str, Any]
    workload_name: str
    workload_fingerprint: str


def create_study(session: Session, study: StudyEntry) -> StudyRecord:
    """Add the study row, status running."""
    record = StudyRecord(
        name=study.name, optuna_study_name=study.optuna_study_name, hardware=study.hardware,
        target_model=study.target, engine=study.engine, objective=study.objective,
        search_space=dict(study.search_space), slo=dict(study.slo), workload_name=study.workload_name,
        workload_fingerprint=study.workload_fingerprint, status="running",
    )
    session.add(record)
    session.flush()
    return record


def set_study_status(session: Session, study_id: int, status: str) -> None:
    """Mark a study running, confirming (its finalists), complete (finished_at set) or interrupted."""
    if status not in STUDY_STATUSES:
        raise ValueError(f"unknown study status {status!r}")
    finished = utcnow() if status == "complete" else None
    session.execute(update(StudyRecord).where(StudyRecord.id == study_id).values(status=status, finished_at=finished))


# -- trials -------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TrialEntry:
    """One finished trial to store: ``measurement`` is a Measurement.to_dict() (central values, for a
    repeated one) for a complete one; ``intervals`` the figures' Estimate dicts and ``speedup`` the
    paired speedup, where measured; ``prediction`` what the performance model expected of it
    beforehand (stored as given, whatever the trial's state)."""

    trial_number: int
    method: str
    depth: int
    concurrency: int
    state: str
    draft: str | None = None
    draft_model_id: int | None = None
    reason: str | None = None
    measurement: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] | None = None
    phase: str = "screening"
    repetitions: int = 1
    intervals: Mapping[str, Any] | None = None
    speedup: float | None = None
    prediction: Mapping[str, Any] | None = None


def record_trial(session: Session, study_id: int, trial: TrialEntry) -> MeasurementRecord:
    """Store one finished trial of study ``study_id`` (see :class:`TrialEntry`)."""
    if trial.state not in TRIAL_STATES:
        raise ValueError(f"unknown trial state {trial.state!r}")
    if trial.phase not in PHASES:
        raise ValueError(f"unknown phase {trial.phase!r}")
    measurement = trial.measurement
    if (trial.state == "complete") != (measurement is not None):
        raise ValueError("a complete trial needs its measurement, and only a complete one has one")
    figures = {name: measurement[name] for name in FIGURE_COLUMNS} if measurement else {}
    details = dict(trial.extra or {})
    details["draft"] = trial.draft
    if measurement:
        details["measurement"] = {
            k: v for k, v in measurement.items() if k not in FIGURE_COLUMNS and k not in CONFIG_FIELDS
        }
    record = MeasurementRecord(
        study_id=study_id, trial_number=trial.trial_number, method=trial.method, draft_model_id=trial.draft_model_id,
        depth=trial.depth, concurrency=trial.concurrency, state=trial.state, reason=trial.reason, extra=details,
        phase=trial.phase, repetitions=trial.repetitions, intervals=dict(trial.intervals) if trial.intervals else None,
        speedup=trial.speedup, prediction=dict(trial.prediction) if trial.prediction is not None else None, **figures,
    )
    session.add(record)
    session.flush()
    return record


def study_rows(session: Session, study_id: int) -> list[TrialRow]:
    """Every stored trial of a study: the screening trials in trial order, then the confirmation rows."""
    records = session.scalars(
        select(MeasurementRecord).where(MeasurementRecord.study_id == study_id)
        .order_by(MeasurementRecord.phase.desc(), MeasurementRecord.trial_number)
    )
    return [trial_row(record) for record in records]


def trial_row(record: MeasurementRecord) -> TrialRow:
    """The row of a stored measurement; its draft model (if any) is read through the record."""
    values = {name: getattr(record, name) for name in ROW_COLUMNS}
    values["acceptance_by_position"] = list(values["acceptance_by_position"] or [])
    values["extra"] = dict(values["extra"] or {})
    values["intervals"] = dict(values["intervals"] or {})
    values["prediction"] = dict(values["prediction"]) if values["prediction"] is not None else None
    values["phase"] = values["phase"] or "screening"
    values["repetitions"] = values["repetitions"] or 1
    return TrialRow(
        **values, draft=values["extra"].get("draft"), measurement_id=record.id,
        draft_fingerprint=record.draft_model.fingerprint if record.draft_model_id is not None else None,
    )


# -- deployment profiles ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ProfileEntry:
    """A study's recommendation: the configuration, its figures (from the measurement row
    ``measurement_id``), the best per concurrency and the ``details`` an export reads."""

    measurement_id: int | None
    method: str
    draft_model_id: int | None
    depth: int
    concurrency: int
    tokens_per_s: float | None
    tpot_ms_p50: float | None
    speedup: float | None
    per_concurrency: list[dict[str, Any]]
    details: Mapping[str, Any]
    repetitions: int = 1
    intervals: Mapping[str, Any] | None = None


def save_profile(session: Session, study: StudyRecord, profile: ProfileEntry) -> DeploymentProfileRecord:
    """Store the study's recommendation, replacing the previous one (one profile per study)."""
    fields = {
        "hardware_id": study.hardware_id, "target_model_id": study.target_model_id, "objective": study.objective,
        "measurement_id": profile.measurement_id, "method": profile.method, "draft_model_id": profile.draft_model_id,
        "depth": profile.depth, "concurrency": profile.concurrency, "tokens_per_s": profile.tokens_per_s,
        "tpot_ms_p50": profile.tpot_ms_p50, "speedup": profile.speedup, "repetitions": profile.repetitions,
        "intervals": dict(profile.intervals) if profile.intervals else None,
        "per_concurrency": profile.per_concurrency, "details": dict(profile.details),
    }
    record = get_or_create(session, DeploymentProfileRecord, {"study_id": study.id}, fields)
    for name, value in fields.items():  # the row may be an earlier recommendation: replace it
        setattr(record, name, value)
    record.created_at = utcnow()
    session.flush()
    return record


def study_profile(session: Session, study_id: int) -> DeploymentProfileRecord | None:
    return session.scalar(select(DeploymentProfileRecord).where(DeploymentProfileRecord.study_id == study_id))


# -- listings -----------------------------------------------------------------------------------


def list_studies(session: Session) -> list[StudySummary]:
    """Every study, newest first, with its trial counts and current best configuration."""
    counts: dict[int, dict[str, int]] = {}
    for study_id, state, count in session.execute(
        select(MeasurementRecord.study_id, MeasurementRecord.state, func.count())
        .where(MeasurementRecord.phase == "screening")  # trials; confirmation rows re-measure finalists
        .group_by(MeasurementRecord.study_id, MeasurementRecord.state)
    ):
        counts.setdefault(study_id, {})[state] = count
    summaries = []
    for study in session.scalars(select(StudyRecord).order_by(StudyRecord.id.desc())):
        profile = study_profile(session, study.id)
        by_state = counts.get(study.id, {})
        summaries.append(
            StudySummary(
                name=study.name, status=study.status, engine=study.engine, objective=study.objective,
                hardware=study.hardware.name, target=study.target_model.name, workload=study.workload_name,
                trials_complete=by_state.get("complete", 0), trials_failed=by_state.get("failed", 0),
                trials_infeasible=by_state.get("infeasible", 0),
                best=(profile.details.get("label") if profile else None),
                best_tokens_per_s=profile.tokens_per_s if profile else None,
                best_speedup=profile.speedup if profile else None,
                created_at=study.created_at, finished_at=study.finished_at,
            )
        )
    return summaries


def study_trials(session: Session, name: str) -> list[TrialRow]:
    """The stored trials of the study called ``name``."""
    study = find_study(session, name)
    if study is None:
        known = session.scalars(select(StudyRecord.name).order_by(StudyRecord.id.desc()).limit(5)).all()
        hint = f"; known studies: {', '.join(known)}" if known else "; run autotune tune first"
        raise NotFoundError(f"no study named {name!r} in this database{hint}")
    return study_rows(session, study.id)
