"""The SQL behind ``autotune profiles``: finding profiles, and the best measured configuration.

Functions take an open session and return ORM records or plain values; turning them into
:mod:`autotune.profiles` dataclasses is the caller's job (the store imports nothing above it).
The hot path is :func:`best_measurement`: "the fastest complete trial of these studies at
concurrency B with TPOT p50 <= X". It is served by ``ix_autotune_measurements_throughput`` (study_id,
state, phase, tokens_per_s, concurrency, tpot_ms_p50): for each study the index is read in throughput
order, concurrency and TPOT are checked in the index itself, and the first fit ends that study's
scan; the table is read for the overall winner only. The per-study questions go in one statement:
a UNION ALL on SQLite, a LATERAL join over the study ids on PostgreSQL (which plans it in a fraction
of the time the union takes).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence

from sqlalchemy import Row, Select, TextClause, func, select, text
from sqlalchemy.orm import Session, joinedload

from autotune.store.tables import (
    DeploymentProfileRecord,
    HardwareRecord,
    MeasurementRecord,
    ModelRecord,
    StudyRecord,
)

COMPLETE = "complete"
# Per-study subqueries combined in one statement (SQLite allows at most 500 terms in a UNION).
STUDIES_PER_QUERY = 100


def _profiles_select() -> Select:
    """Profiles with their study, hardware and models joined in (one query), newest first."""
    return (
        select(DeploymentProfileRecord)
        .options(
            joinedload(DeploymentProfileRecord.study),
            joinedload(DeploymentProfileRecord.hardware),
            joinedload(DeploymentProfileRecord.target_model),
            joinedload(DeploymentProfileRecord.draft_model),
        )
        .order_by(DeploymentProfileRecord.created_at.desc(), DeploymentProfileRecord.id.desc())
    )


def find_profiles(
    session: Session,
    *,
    hardware_ids: Collection[int] | None = None,
    target_ids: Collection[int] | None = None,
    method: str | None = None,
    study_ids: Collection[int] | None = None,
) -> list[DeploymentProfileRecord]:
    """Profiles matching every given filter (None: no filter on that column), newest first."""
    query = _profiles_select()
    if hardware_ids is not None:
        query = query.where(DeploymentProfileRecord.hardware_id.in_(list(hardware_ids)))
    if target_ids is not None:
        query = query.where(DeploymentProfileRecord.target_model_id.in_(list(target_ids)))
    if method is not None:
        query = query.where(DeploymentProfileRecord.method == method)
    if study_ids is not None:
        query = query.where(DeploymentProfileRecord.study_id.in_(list(study_ids)))
    return list(session.scalars(query))


def profile_candidates(
    session: Session, *, hardware_ids: Collection[int] | None, target_ids: Collection[int]
) -> list[Row]:
    """(id, study_id, tokens_per_s, created_at) of the matching profiles, newest first: the few
    columns choosing among them needs, without loading the records."""
    query = select(
        DeploymentProfileRecord.id,
        DeploymentProfileRecord.study_id,
        DeploymentProfileRecord.tokens_per_s,
        DeploymentProfileRecord.created_at,
    ).where(DeploymentProfileRecord.target_model_id.in_(list(target_ids)))
    if hardware_ids is not None:
        query = query.where(DeploymentProfileRecord.hardware_id.in_(list(hardware_ids)))
    query = query.order_by(DeploymentProfileRecord.created_at.desc(), DeploymentProfileRecord.id.desc())
    return list(session.execute(query))


def get_profile(session: Session, profile_id: int) -> DeploymentProfileRecord | None:
    """One profile by id, with its study, hardware and models loaded."""
    return session.scalar(_profiles_select().where(DeploymentProfileRecord.id == profile_id))


def latest_profile_of_study(session: Session, study_id: int) -> DeploymentProfileRecord | None:
    """The newest profile a study wrote (a study may re-run and write again)."""
    return session.scalar(_profiles_select().where(DeploymentProfileRecord.study_id == study_id).limit(1))


def _by_key(session: Session, record_type: type, key: str) -> list:
    """Rows of ``record_type`` whose fingerprint is ``key``, else whose name is ``key``, else the one
    row whose fingerprint starts with ``key`` (one round trip; prefixes must be unambiguous)."""
    rows = session.scalars(
        select(record_type).where(
            (record_type.fingerprint == key) | (record_type.name == key) | record_type.fingerprint.startswith(key, autoescape=True)
        )
    ).all()
    for matches in (
        [r for r in rows if r.fingerprint == key],
        [r for r in rows if r.name == key],
    ):
        if matches:
            return matches
    return list(rows) if len(rows) == 1 else []


def find_hardware(session: Session, key: str) -> list[HardwareRecord]:
    """Hardware rows with fingerprint ``key``, else named ``key``, else the unique fingerprint prefix."""
    return _by_key(session, HardwareRecord, key)


def hardware_by_fingerprint(session: Session, fingerprint: str) -> HardwareRecord | None:
    return session.scalar(select(HardwareRecord).where(HardwareRecord.fingerprint == fingerprint))


def find_models(session: Session, key: str) -> list[ModelRecord]:
    """Models with fingerprint ``key``, else named ``key``, else the unique fingerprint prefix."""
    return _by_key(session, ModelRecord, key)


def models_by_fingerprint(session: Session, fingerprints: Collection[str]) -> dict[str, ModelRecord]:
    rows = session.scalars(select(ModelRecord).where(ModelRecord.fingerprint.in_(list(fingerprints))))
    return {row.fingerprint: row for row in rows}


def models_by_id(session: Session, ids: Collection[int]) -> dict[int, ModelRecord]:
    if not ids:
        return {}
    return {row.id: row for row in session.scalars(select(ModelRecord).where(ModelRecord.id.in_(list(ids))))}


def find_study(session: Session, key: str | int) -> StudyRecord | None:
    """A study by name, or by id when ``key`` is an integer (or all digits)."""
    record = session.scalar(select(StudyRecord).where(StudyRecord.name == str(key)))
    if record is None and str(key).isdigit():
        record = session.get(StudyRecord, int(key))
    return record


def study_names(session: Session, limit: int = 10) -> list[str]:
    """The newest study names (for "did you mean" messages)."""
    query = select(StudyRecord.name).order_by(StudyRecord.id.desc()).limit(limit)
    return list(session.scalars(query))


def study_measurements(session: Session, study_id: int) -> list[MeasurementRecord]:
    """Every trial of a study, in trial order."""
    query = (
        select(MeasurementRecord)
        .where(MeasurementRecord.study_id == study_id)
        .order_by(MeasurementRecord.trial_number, MeasurementRecord.id)
    )
    return list(session.scalars(query))


def best_measurement(
    session: Session,
    study_ids: Collection[int],
    *,
    concurrency: int | None = None,
    max_tpot_ms: float | None = None,
    phase: str = "confirmation",
) -> MeasurementRecord | None:
    """The complete trial of ``phase`` with the highest tokens/s among ``study_ids``, optionally
    only at ``concurrency`` and only with ``tpot_ms_p50 <= max_tpot_ms``; ties go to the newest trial.

    Asked per study ("its fastest fitting trial") and combined: each per-study question walks
    ``ix_autotune_measurements_throughput`` in throughput order and stops at the first fit,
    where one query over all studies would read every candidate trial to sort them.
    """
    studies = sorted(set(study_ids))
    if not studies:
        return None
    params = {"state": COMPLETE, "phase": phase, "concurrency": concurrency, "max_tpot_ms": max_tpot_ms}
    by_concurrency, by_tpot = concurrency is not None, max_tpot_ms is not None
    if session.get_bind().dialect.name == "postgresql":
        statement = _fastest_fit_lateral_sql(by_concurrency, by_tpot)
        winners = [session.execute(statement, {**params, "studies": studies}).first()]
    else:
        winners = []
        for start in range(0, len(studies), STUDIES_PER_QUERY):
            chunk = studies[start : start + STUDIES_PER_QUERY]
            statement = _fastest_fit_union_sql(len(chunk), by_concurrency, by_tpot)
            chunk_params = {**params, **{f"study_{i}": study_id for i, study_id in enumerate(chunk)}}
            winners.append(session.execute(statement, chunk_params).first())
    winners = [row for row in winners if row is not None]
    if not winners:
        return None
    best = max(winners, key=lambda row: (row.tokens_per_s, row.id))
    return session.get(MeasurementRecord, best.id)


def _throughput_order(table: str = "") -> str:
    """Fastest first, the newest trial first among ties; columns of ``table`` if named."""
    prefix = f"{table}." if table else ""
    return f"ORDER BY {prefix}{MeasurementRecord.tokens_per_s.key} DESC, {prefix}{MeasurementRecord.id.key} DESC"


def _fits(study: str, by_concurrency: bool, by_tpot: bool) -> str:
    """The per-study question: id and tokens/s of the fastest fitting trial of the study whose id
    the SQL expression ``study`` gives."""
    m = MeasurementRecord
    # A speculative method at depth 0 is a K = 0 row (drafter loaded, nothing drafted: the off state
    # an engine's server runs where none won, autotune/analysis/offstate.py): measured to price that
    # off state, never a configuration to deploy, so never an answer here.
    conditions = [f"{m.study_id.key} = {study}", f"{m.state.key} = :state", f"{m.phase.key} = :phase",
                  f"{m.tokens_per_s.key} IS NOT NULL", f"({m.method.key} = 'none' OR {m.depth.key} > 0)"]
    if by_concurrency:
        conditions.append(f"{m.concurrency.key} = :concurrency")
    if by_tpot:
        conditions.append(f"{m.tpot_ms_p50.key} <= :max_tpot_ms")
    return (f"SELECT {m.id.key}, {m.tokens_per_s.key} FROM {m.__tablename__} WHERE {' AND '.join(conditions)} "
            f"{_throughput_order()} LIMIT 1")


@functools.cache
def _fastest_fit_union_sql(studies: int, by_concurrency: bool, by_tpot: bool) -> TextClause:
    """SQL for "the fastest fitting trial of each of ``studies`` studies, then the fastest of those"
    as a UNION ALL of per-study subqueries (SQLite, which has no LATERAL).

    Written as text, cached per shape, with the study ids as parameters: an ORM statement of 100
    subqueries costs more to build and cache-key on every call than the query takes to run.
    """
    union = " UNION ALL ".join(f"SELECT * FROM ({_fits(f':study_{i}', by_concurrency, by_tpot)}) AS study_{i}"
                               for i in range(studies))
    return text(f"SELECT id, tokens_per_s FROM ({union}) AS fits {_throughput_order()} LIMIT 1")


@functools.cache
def _fastest_fit_lateral_sql(by_concurrency: bool, by_tpot: bool) -> TextClause:
    """The same question on PostgreSQL: the per-study subquery run for each element of the array
    ``:studies`` (LATERAL). One short statement whatever the number of studies: PostgreSQL took
    5-8 ms to plan the union of 50 subqueries, longer than running it (bench/bench_service.py)."""
    return text(f"SELECT fits.id, fits.tokens_per_s FROM unnest(CAST(:studies AS integer[])) AS wanted(study_id) "
                f"CROSS JOIN LATERAL ({_fits('wanted.study_id', by_concurrency, by_tpot)}) AS fits "
                f"{_throughput_order('fits')} LIMIT 1")


def measured_concurrencies(session: Session, study_ids: Collection[int]) -> list[int]:
    """The concurrency levels with at least one complete trial among ``study_ids``, ascending."""
    query = (
        select(MeasurementRecord.concurrency)
        .where(MeasurementRecord.study_id.in_(list(study_ids)), MeasurementRecord.state == COMPLETE)
        .distinct()
        .order_by(MeasurementRecord.concurrency)
    )
    return list(session.scalars(query))


def fastest_tpot(session: Session, study_ids: Collection[int], concurrency: int | None) -> MeasurementRecord | None:
    """The complete trial with the lowest TPOT p50 (at ``concurrency`` if given)."""
    query = select(MeasurementRecord).where(
        MeasurementRecord.study_id.in_(list(study_ids)),
        MeasurementRecord.state == COMPLETE,
        MeasurementRecord.tpot_ms_p50.is_not(None),
    )
    if concurrency is not None:
        query = query.where(MeasurementRecord.concurrency == concurrency)
    return session.scalar(query.order_by(MeasurementRecord.tpot_ms_p50, MeasurementRecord.id.desc()).limit(1))


def profile_counts_by_hardware(
    session: Session, target_ids: Collection[int]
) -> list[tuple[HardwareRecord, int]]:
    """Where ``target_ids`` have profiles: (hardware, number of profiles), most profiles first."""
    count = func.count(DeploymentProfileRecord.id)
    query = (
        select(HardwareRecord, count)
        .join(DeploymentProfileRecord, DeploymentProfileRecord.hardware_id == HardwareRecord.id)
        .where(DeploymentProfileRecord.target_model_id.in_(list(target_ids)))
        .group_by(HardwareRecord.id)
        .order_by(count.desc(), HardwareRecord.id)
    )
    return [(row[0], row[1]) for row in session.execute(query)]


def profile_counts_by_target(
    session: Session, hardware_ids: Collection[int] | None
) -> list[tuple[ModelRecord, int]]:
    """Which targets have profiles (on ``hardware_ids``, or anywhere for None), most profiles first."""
    count = func.count(DeploymentProfileRecord.id)
    query = select(ModelRecord, count).join(
        DeploymentProfileRecord, DeploymentProfileRecord.target_model_id == ModelRecord.id
    )
    if hardware_ids is not None:
        query = query.where(DeploymentProfileRecord.hardware_id.in_(list(hardware_ids)))
    query = query.group_by(ModelRecord.id).order_by(count.desc(), ModelRecord.id)
    return [(row[0], row[1]) for row in session.execute(query)]


def stored_names(records: Sequence[HardwareRecord | ModelRecord]) -> str:
    """"a (fingerprint), b (fingerprint)" for messages, or "none"."""
    return ", ".join(f"{r.name} ({r.fingerprint})" for r in records) or "none"
