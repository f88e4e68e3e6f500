"""The profile database schema: SQLAlchemy 2 typed ORM.

Optuna's RDB storage lives in the same database and owns generic names (``studies``, ``trials``,
``trial_params``, ``version_info``, ``alembic_version``, ...), so every table here carries the
``autotune_`` prefix and our Alembic revision is kept in ``autotune_alembic_version``.

Shape of the data::

    hardware_profiles 1──* hardware_probes          (one machine kind, many probes of it)
    model_artifacts   1──* tuning_studies (target)  (targets and drafts, by content fingerprint)
    tuning_studies    1──* measurements             (one row per trial: configuration + figures)
    tuning_studies    1──1 deployment_profiles      (the winning configuration: at most one per study)
    model_artifacts   1──* acceptance_profiles      (a proposer's acceptance on a workload: any hardware)
    hardware_profiles 1──* cost_profiles            (a target's step costs on one machine kind and engine)
    jobs                                            (queued tunes of the service: autotune.jobs)
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

TABLE_PREFIX = "autotune_"
VERSION_TABLE = "autotune_alembic_version"

# Explicit constraint names keep migrations identical on SQLite and PostgreSQL and make
# `alembic check` stable.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> dt.datetime:
    """The current time, timezone-aware UTC (what every timestamp column stores)."""
    return dt.datetime.now(dt.timezone.utc)


class Base(DeclarativeBase):
    """Declarative base holding the metadata that Alembic compares against."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {
        dict[str, Any]: JSON,
        list[Any]: JSON,
        dt.datetime: DateTime(timezone=True),
    }


class HardwareRecord(Base):
    """One kind of machine, identified by a fingerprint of its hardware identity."""

    __tablename__ = "autotune_hardware_profiles"

    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(255), index=True)
    device_type: Mapped[str] = mapped_column(String(16))  # "cuda" | "cpu"
    device_count: Mapped[int] = mapped_column(Integer)
    memory_total_bytes: Mapped[int] = mapped_column(BigInteger)  # per device (RAM for CPU)
    spec: Mapped[dict[str, Any]] = mapped_column(default=dict)  # static facts (driver, cores, ...)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    probes: Mapped[list[ProbeRecord]] = relationship(
        back_populates="hardware", cascade="all, delete-orphan", order_by="ProbeRecord.id"
    )


class ProbeRecord(Base):
    """The measured values of one probe run (values change between runs; identity does not)."""

    __tablename__ = "autotune_hardware_probes"

    id: Mapped[int] = mapped_column(primary_key=True)
    hardware_id: Mapped[int] = mapped_column(
        ForeignKey("autotune_hardware_profiles.id", ondelete="CASCADE"), index=True
    )
    method_version: Mapped[int] = mapped_column(Integer)
    quick: Mapped[bool] = mapped_column(Boolean, default=False)
    duration_s: Mapped[float] = mapped_column(Float)
    # [{"name", "unit", "measured", "peak"}...]; the ratio is derived, never stored.
    metrics: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    hardware: Mapped[HardwareRecord] = relationship(back_populates="probes")


class ModelRecord(Base):
    """A target or draft model, identified by a fingerprint of its weights and config."""

    __tablename__ = "autotune_model_artifacts"

    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(255), index=True)
    role: Mapped[str] = mapped_column(String(16))  # "target" | "draft"
    source: Mapped[str] = mapped_column(Text)  # path, or "builtin:<name>"
    num_params: Mapped[int | None] = mapped_column(BigInteger)
    num_mtp_modules: Mapped[int] = mapped_column(Integer, default=0)
    vocab_size: Mapped[int | None] = mapped_column(Integer)
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class StudyRecord(Base):
    """One search: target, hardware, workload, objective and search space, plus its Optuna study."""

    __tablename__ = "autotune_tuning_studies"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    optuna_study_name: Mapped[str] = mapped_column(String(255))
    hardware_id: Mapped[int] = mapped_column(
        ForeignKey("autotune_hardware_profiles.id"), index=True
    )
    target_model_id: Mapped[int] = mapped_column(
        ForeignKey("autotune_model_artifacts.id"), index=True
    )
    engine: Mapped[str] = mapped_column(String(32))  # "embedded" | "trtllm"
    objective: Mapped[str] = mapped_column(String(32))  # "throughput" | "pareto"
    search_space: Mapped[dict[str, Any]] = mapped_column(default=dict)
    slo: Mapped[dict[str, Any]] = mapped_column(default=dict)
    workload_name: Mapped[str] = mapped_column(String(255))
    workload_fingerprint: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="running")
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column()

    hardware: Mapped[HardwareRecord] = relationship()
    target_model: Mapped[ModelRecord] = relationship()
    measurements: Mapped[list[MeasurementRecord]] = relationship(
        back_populates="study", cascade="all, delete-orphan", order_by="MeasurementRecord.id"
    )


class MeasurementRecord(Base):
    """One trial: a configuration and what running it measured (or why it did not run)."""

    __tablename__ = "autotune_measurements"
    __table_args__ = (
        # A trial number is unique within its phase: screening rows carry Optuna's trial numbers,
        # confirmation rows their own sequence (migration 0004).
        UniqueConstraint("study_id", "phase", "trial_number", name="uq_autotune_measurements_trial"),
        # The lookups issue 5's `profiles best` needs: by study and configuration.
        Index("ix_autotune_measurements_config", "study_id", "method", "concurrency", "depth"),
        # `profiles best`: a study's complete trials of one phase in throughput order, concurrency
        # and TPOT checked in the index (migrations 0003, 0004; see store/profile_queries.py).
        Index(
            "ix_autotune_measurements_throughput", "study_id", "state", "phase", "tokens_per_s", "concurrency",
            "tpot_ms_p50",
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(
        ForeignKey("autotune_tuning_studies.id", ondelete="CASCADE")
    )
    # Screening rows (baselines included: they are enqueued Optuna trials): Optuna's trial number.
    # Confirmation rows: their own sequence from 0 within the study (search/tuner.py).
    trial_number: Mapped[int] = mapped_column(Integer)
    method: Mapped[str] = mapped_column(String(16))
    draft_model_id: Mapped[int | None] = mapped_column(
        ForeignKey("autotune_model_artifacts.id"), index=True
    )
    depth: Mapped[int] = mapped_column(Integer)
    concurrency: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))  # complete | failed | infeasible
    reason: Mapped[str | None] = mapped_column(Text)
    tokens_per_s: Mapped[float | None] = mapped_column(Float)
    requests_per_s: Mapped[float | None] = mapped_column(Float)
    ttft_ms_p50: Mapped[float | None] = mapped_column(Float)
    ttft_ms_p90: Mapped[float | None] = mapped_column(Float)
    ttft_ms_p99: Mapped[float | None] = mapped_column(Float)
    tpot_ms_p50: Mapped[float | None] = mapped_column(Float)
    tpot_ms_p90: Mapped[float | None] = mapped_column(Float)
    tpot_ms_p99: Mapped[float | None] = mapped_column(Float)
    acceptance_rate: Mapped[float | None] = mapped_column(Float)
    acceptance_length: Mapped[float | None] = mapped_column(Float)
    acceptance_by_position: Mapped[list[Any]] = mapped_column(default=list)
    drafted_tokens: Mapped[int | None] = mapped_column(BigInteger)
    accepted_tokens: Mapped[int | None] = mapped_column(BigInteger)
    peak_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    wall_time_s: Mapped[float | None] = mapped_column(Float)
    # Paired with the baseline measured in the same rounds; None for a screening trial (one pass).
    speedup: Mapped[float | None] = mapped_column(Float)
    # screening (one pass per Optuna trial) | confirmation (the full protocol, see engines/protocol.py)
    phase: Mapped[str] = mapped_column(String(16), default="screening", server_default="screening")
    repetitions: Mapped[int] = mapped_column(Integer, default=1, server_default="1")  # rows before 0004: 1
    # {"tokens_per_s": {"value", "low", "high", "n", "confidence"}, "speedup": {...}, ...}; None: one pass
    intervals: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    # What the performance model predicted before the trial ran (migration 0005), kept next to what
    # was measured so the model's error can be judged: {"tokens_per_s": {"value", "low", "high"},
    # "tpot_ms_p50": {...}, "sigma", "source"}; None: no prediction was made (or rows before 0005).
    prediction: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    extra: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    study: Mapped[StudyRecord] = relationship(back_populates="measurements")
    draft_model: Mapped[ModelRecord | None] = relationship()


class DeploymentProfileRecord(Base):
    """The configuration a study recommends, with its figures and the per-concurrency table."""

    __tablename__ = "autotune_deployment_profiles"

    id: Mapped[int] = mapped_column(primary_key=True)
    # One profile per study (migration 0006): results.save_profile replaces it, under the study's
    # lock; the constraint makes a second row an error rather than an ambiguous answer.
    study_id: Mapped[int] = mapped_column(
        ForeignKey("autotune_tuning_studies.id", ondelete="CASCADE"), unique=True
    )
    hardware_id: Mapped[int] = mapped_column(
        ForeignKey("autotune_hardware_profiles.id"), index=True
    )
    target_model_id: Mapped[int] = mapped_column(
        ForeignKey("autotune_model_artifacts.id"), index=True
    )
    # Indexed (0006) like every foreign key: deleting a measurement or a model looks up its profiles.
    measurement_id: Mapped[int | None] = mapped_column(
        ForeignKey("autotune_measurements.id", ondelete="SET NULL"), index=True
    )
    method: Mapped[str] = mapped_column(String(16), index=True)
    draft_model_id: Mapped[int | None] = mapped_column(ForeignKey("autotune_model_artifacts.id"), index=True)
    depth: Mapped[int] = mapped_column(Integer)
    concurrency: Mapped[int] = mapped_column(Integer)
    objective: Mapped[str] = mapped_column(String(32))
    tokens_per_s: Mapped[float | None] = mapped_column(Float)
    tpot_ms_p50: Mapped[float | None] = mapped_column(Float)
    speedup: Mapped[float | None] = mapped_column(Float)
    repetitions: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    intervals: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))  # as MeasurementRecord's
    # [{"concurrency", "method", "depth", "tokens_per_s", "speedup"}...]
    per_concurrency: Mapped[list[Any]] = mapped_column(default=list)
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, index=True)

    study: Mapped[StudyRecord] = relationship()
    hardware: Mapped[HardwareRecord] = relationship()
    target_model: Mapped[ModelRecord] = relationship(foreign_keys=[target_model_id])
    draft_model: Mapped[ModelRecord | None] = relationship(foreign_keys=[draft_model_id])


class AcceptanceProfileRecord(Base):
    """How often a proposer's drafts are accepted on a workload, position by position.

    Acceptance depends on the target, the proposer and the text, not on the machine: it is kept
    apart from the step costs (:class:`CostProfileRecord`) so that one measurement anywhere serves
    predictions on every machine kind. Pooled by the caller from the measurements in ``sources``.
    """

    __tablename__ = "autotune_acceptance_profiles"
    __table_args__ = (
        UniqueConstraint(
            "target_model_id", "proposer", "workload_fingerprint", name="uq_autotune_acceptance_profiles_key"
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    target_model_id: Mapped[int] = mapped_column(
        ForeignKey("autotune_model_artifacts.id", ondelete="CASCADE"), index=True
    )
    proposer: Mapped[str] = mapped_column(String(80))  # "mtp" | "ngram" | "draft:<draft model fingerprint>"
    # The draft model's row for a "draft:..." proposer; the fingerprint in ``proposer`` outlives it.
    draft_model_id: Mapped[int | None] = mapped_column(
        ForeignKey("autotune_model_artifacts.id", ondelete="SET NULL"), index=True
    )
    workload_fingerprint: Mapped[str] = mapped_column(String(64))
    workload_name: Mapped[str] = mapped_column(String(255))
    max_depth: Mapped[int] = mapped_column(Integer)
    # One entry per draft position i = 1..max_depth: {"steps", "accepted"}: the sequence-steps that
    # could accept >= i tokens and those that did (counts, so that pooling stays exact).
    positions: Mapped[list[Any]] = mapped_column(default=list)
    # The measurement ids pooled into ``positions``: saving the same measurement again never counts twice.
    sources: Mapped[list[Any]] = mapped_column(default=list)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    target_model: Mapped[ModelRecord] = relationship(foreign_keys=[target_model_id])
    draft_model: Mapped[ModelRecord | None] = relationship(foreign_keys=[draft_model_id])


class CostProfileRecord(Base):
    """What one engine step of a target costs on one machine kind (timed, or a roofline estimate).

    ``key`` is the caller's digest of what the points depend on besides hardware, engine and target
    (the drafts, the timing settings): a different digest is a different profile, never an overwrite.
    """

    __tablename__ = "autotune_cost_profiles"
    __table_args__ = (
        UniqueConstraint("hardware_id", "engine", "target_model_id", "key", name="uq_autotune_cost_profiles_key"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    hardware_id: Mapped[int] = mapped_column(
        ForeignKey("autotune_hardware_profiles.id", ondelete="CASCADE"), index=True
    )
    engine: Mapped[str] = mapped_column(String(32))  # as StudyRecord.engine
    target_model_id: Mapped[int] = mapped_column(
        ForeignKey("autotune_model_artifacts.id", ondelete="CASCADE"), index=True
    )
    key: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(16))  # "timed" | "roofline"
    points: Mapped[list[Any]] = mapped_column(default=list)  # the cost model's points, opaque to the store
    settings: Mapped[dict[str, Any]] = mapped_column(default=dict)
    duration_s: Mapped[float | None] = mapped_column(Float)  # how long timing took; None for a roofline
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    hardware: Mapped[HardwareRecord] = relationship()
    target_model: Mapped[ModelRecord] = relationship()


class JobRecord(Base):
    """A tune queued through the service (:mod:`autotune.jobs`): its request, where it stands and
    what it produced. The same table on SQLite and PostgreSQL; on PostgreSQL procrastinate's own
    job (``queue_job_id``) is what workers claim, this row is what everyone reads."""

    __tablename__ = "autotune_jobs"

    id: Mapped[int] = mapped_column(primary_key=True)
    status: Mapped[str] = mapped_column(String(16), index=True)  # queued | running | succeeded | failed | cancelled
    request: Mapped[dict[str, Any]] = mapped_column(default=dict)  # the tune options, as POSTed
    study_name: Mapped[str] = mapped_column(String(255))
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # how many times a worker took it
    worker: Mapped[str | None] = mapped_column(String(255))  # host:pid of the last worker that took it
    queue_job_id: Mapped[int | None] = mapped_column(BigInteger)  # procrastinate's job id (PostgreSQL)
    progress: Mapped[dict[str, Any]] = mapped_column(default=dict)
    log_tail: Mapped[list[Any]] = mapped_column(default=list)
    profile_id: Mapped[int | None] = mapped_column(Integer)  # not a foreign key: a rerun of the study replaces it
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, index=True)
    started_at: Mapped[dt.datetime | None] = mapped_column()
    heartbeat_at: Mapped[dt.datetime | None] = mapped_column()
    finished_at: Mapped[dt.datetime | None] = mapped_column()


class ValidationRunRecord(Base):
    """One ``autotune validate`` of a deployment profile (migration 0008): the exported schedule,
    the best fixed depth and none served side by side under a load generator. ``result`` holds the
    servers' figures with their intervals per concurrency level, in the shape of
    :meth:`autotune.validation.results.ValidationResult.to_dict` (without id, profile and time, which
    are columns). Deleted with its profile: it says how that profile held when served."""

    __tablename__ = "autotune_validation_runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    profile_id: Mapped[int] = mapped_column(
        ForeignKey("autotune_deployment_profiles.id", ondelete="CASCADE"), index=True
    )
    engine: Mapped[str] = mapped_column(String(16))
    engine_version: Mapped[str] = mapped_column(String(64))
    runs: Mapped[int] = mapped_column(Integer)
    concurrency: Mapped[list[Any]] = mapped_column(default=list)
    result: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, index=True)
