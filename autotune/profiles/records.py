"""Conversions between store records and profile dataclasses (both directions, nothing else)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy.orm import Session

from autotune.profiles.data import DeploymentProfile, HardwareInfo, ModelInfo, StudyInfo
from autotune.store import profile_queries
from autotune.store.tables import (
    DeploymentProfileRecord,
    HardwareRecord,
    MeasurementRecord,
    ModelRecord,
    StudyRecord,
)
from autotune.store.results import ROW_COLUMNS, TrialRow, trial_row


def hardware_info(record: HardwareRecord) -> HardwareInfo:
    return HardwareInfo(
        fingerprint=record.fingerprint,
        name=record.name,
        device_type=record.device_type,
        device_count=record.device_count,
        memory_total_bytes=record.memory_total_bytes,
        spec=dict(record.spec or {}),
    )


def model_info(record: ModelRecord) -> ModelInfo:
    return ModelInfo(
        fingerprint=record.fingerprint,
        name=record.name,
        role=record.role,
        source=record.source,
        num_params=record.num_params,
        num_mtp_modules=record.num_mtp_modules,
        vocab_size=record.vocab_size,
        config=dict(record.config or {}),
    )


def study_info(record: StudyRecord) -> StudyInfo:
    return StudyInfo(
        name=record.name,
        optuna_study_name=record.optuna_study_name,
        engine=record.engine,
        objective=record.objective,
        workload_name=record.workload_name,
        workload_fingerprint=record.workload_fingerprint,
        status=record.status,
        created_at=record.created_at,
        finished_at=record.finished_at,
        search_space=dict(record.search_space or {}),
        slo=dict(record.slo or {}),
    )


def deployment_profile(
    session: Session, record: DeploymentProfileRecord, *, with_measurements: bool = False
) -> DeploymentProfile:
    """A profile dataclass; with its study's trials (and every draft they used) if asked."""
    chosen_trial, chosen_phase = None, (record.details or {}).get("phase", "screening")
    if record.measurement_id is not None:
        chosen = session.get(MeasurementRecord, record.measurement_id)
        if chosen is not None:
            chosen_trial, chosen_phase = chosen.trial_number, chosen.phase
    measurements: tuple[TrialRow, ...] = ()
    draft_models: tuple[ModelInfo, ...] = ()
    if with_measurements:
        rows = profile_queries.study_measurements(session, record.study_id)
        # Loaded first, so that each row's draft is found in the session, not queried row by row.
        drafts = profile_queries.models_by_id(session, {r.draft_model_id for r in rows if r.draft_model_id})
        measurements = tuple(trial_row(r) for r in rows)
        draft_models = tuple(model_info(m) for m in sorted(drafts.values(), key=lambda m: m.fingerprint))
    return DeploymentProfile(
        id=record.id,
        created_at=record.created_at,
        study=study_info(record.study),
        hardware=hardware_info(record.hardware),
        target=model_info(record.target_model),
        draft=model_info(record.draft_model) if record.draft_model else None,
        method=record.method,
        depth=record.depth,
        concurrency=record.concurrency,
        objective=record.objective,
        tokens_per_s=record.tokens_per_s,
        tpot_ms_p50=record.tpot_ms_p50,
        speedup=record.speedup,
        repetitions=record.repetitions or 1,
        intervals=dict(record.intervals or {}),
        per_concurrency=[dict(row) for row in record.per_concurrency or []],
        details=dict(record.details or {}),
        chosen_trial=chosen_trial,
        chosen_phase=chosen_phase,
        measurements=measurements,
        draft_models=draft_models,
    )


def new_study_record(study: StudyInfo, hardware: HardwareRecord, target: ModelRecord) -> StudyRecord:
    return StudyRecord(
        name=study.name,
        optuna_study_name=study.optuna_study_name,
        hardware=hardware,
        target_model=target,
        engine=study.engine,
        objective=study.objective,
        search_space=dict(study.search_space),
        slo=dict(study.slo),
        workload_name=study.workload_name,
        workload_fingerprint=study.workload_fingerprint,
        status=study.status,
        created_at=study.created_at,
        finished_at=study.finished_at,
    )


def new_measurement_records(
    measurements: Iterable[TrialRow], study: StudyRecord, drafts: Mapping[str, ModelRecord]
) -> list[MeasurementRecord]:
    """Records for ``measurements``; ``drafts`` maps draft fingerprints to (stored) model records."""
    records = []
    for m in measurements:
        values = {name: getattr(m, name) for name in ROW_COLUMNS}
        if values["created_at"] is None:
            del values["created_at"]  # the column default (now) applies
        values["acceptance_by_position"] = list(m.acceptance_by_position)
        values["extra"] = dict(m.extra)
        values["intervals"] = dict(m.intervals) or None  # as the tuner stores a row without intervals
        values["prediction"] = dict(m.prediction) if m.prediction is not None else None
        draft = drafts[m.draft_fingerprint] if m.draft_fingerprint else None
        records.append(MeasurementRecord(study=study, draft_model=draft, **values))
    return records
