"""The job table (``autotune_jobs``): every state change of a job is one conditional UPDATE here,
the same SQL on SQLite and PostgreSQL, so that two processes racing for a job (two workers, a
worker and a cancel) cannot both win.

A job's life: ``queued`` -> ``running`` (a worker took it; ``attempts`` counts how often) ->
``succeeded`` | ``failed`` | ``cancelled``. A running job whose worker died is taken again
(``running`` -> ``running``, one more attempt): on PostgreSQL when procrastinate retries it, on
SQLite when its heartbeat is stale (:func:`requeue_stale`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from autotune.errors import NotFoundError
from autotune.jobs.eta import NO_ETA, live_eta
from autotune.store.tables import JobRecord, utcnow

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = "queued", "running", "succeeded", "failed", "cancelled"
STATUSES = (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED)
FINAL = (SUCCEEDED, FAILED, CANCELLED)
STUDY_PREFIX = "job-"  # a job that names no study tunes study "job-<id>": the same on every attempt


@dataclass(frozen=True)
class Job:
    """A job as the API and ``--json`` show it."""

    id: int
    status: str
    study: str
    request: dict[str, Any]
    progress: dict[str, Any]
    log_tail: list[str]
    profile_id: int | None
    error: str | None
    attempts: int
    worker: str | None
    cancel_requested: bool
    created_at: dt.datetime
    started_at: dt.datetime | None
    heartbeat_at: dt.datetime | None
    finished_at: dt.datetime | None

    @classmethod
    def of(cls, row: JobRecord) -> Job:
        return cls(row.id, row.status, row.study_name, dict(row.request), dict(row.progress), list(row.log_tail),
                   row.profile_id, row.error, row.attempts, row.worker, row.cancel_requested, _utc(row.created_at),
                   _utc(row.started_at), _utc(row.heartbeat_at), _utc(row.finished_at))

    def to_dict(self, now: dt.datetime | None = None) -> dict[str, Any]:
        """The job as the API shows it; a running job's ETA is computed as of ``now`` (default: the
        current time), so that it moves between the tune's events (:mod:`autotune.jobs.eta`)."""
        eta = live_eta(self.progress, now or utcnow()) if self.status == RUNNING else NO_ETA
        return {
            "id": self.id, "status": self.status, "study": self.study, "progress": {**self.progress, **eta},
            "log_tail": self.log_tail, "profile_id": self.profile_id, "error": self.error, "attempts": self.attempts,
            "worker": self.worker, "cancel_requested": self.cancel_requested,
            **{name: _iso(getattr(self, name)) for name in ("created_at", "started_at", "heartbeat_at", "finished_at")},
            "request": self.request,
        }


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    """SQLite hands timestamps back without their zone; every one is stored in UTC."""
    return value.replace(tzinfo=dt.timezone.utc) if value is not None and value.tzinfo is None else value


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def create(session: Session, request: dict[str, Any]) -> JobRecord:
    """A queued job for ``request`` (the tune options by their request names), with its study name."""
    row = JobRecord(status=QUEUED, request=request, study_name=request.get("study") or "", progress={}, log_tail=[])
    session.add(row)
    session.flush()  # the id names the study
    if not row.study_name:
        row.study_name = f"{STUDY_PREFIX}{row.id}"
    return row


def listing(session: Session, limit: int, status: str | None = None) -> tuple[list[Job], int]:
    """The newest ``limit`` jobs (optionally of one status) and how many there are in all."""
    where = [JobRecord.status == status] if status else []
    total = session.scalar(select(func.count()).select_from(JobRecord).where(*where)) or 0
    rows = session.scalars(select(JobRecord).where(*where).order_by(JobRecord.id.desc()).limit(limit))
    return [Job.of(row) for row in rows], total


def count(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(JobRecord)) or 0


def get(session: Session, job_id: int) -> JobRecord:
    """Job ``job_id``; NotFoundError when there is none."""
    row = session.get(JobRecord, job_id, populate_existing=True)
    if row is None:
        raise NotFoundError(f"no job {job_id}; `GET /v1/jobs` lists the jobs")
    return row


def cancel(session: Session, job_id: int) -> JobRecord:
    """A queued job is cancelled at once; a running one is asked to stop (its worker stops at the
    next trial boundary, :mod:`autotune.jobs.progress`). A finished job is left as it is."""
    now = utcnow()
    _set(session, job_id, (QUEUED,), status=CANCELLED, finished_at=now)
    _set(session, job_id, (RUNNING,), cancel_requested=True)
    return get(session, job_id)


def take(session: Session, job_id: int, worker: str, states: tuple[str, ...] = (QUEUED,)) -> bool:
    """Mark job ``job_id`` as run by ``worker`` when its status is in ``states``; True when it was.
    Only the queue may pass ``(QUEUED, RUNNING)``: procrastinate hands a job to one worker at a
    time, so a running job it hands out again is one whose worker died. A job whose cancellation was
    asked is cancelled here instead, and False returned."""
    now = utcnow()
    _set(session, job_id, states, JobRecord.cancel_requested.is_(True), status=CANCELLED, finished_at=now)
    return _set(session, job_id, states, status=RUNNING, worker=worker, started_at=now, heartbeat_at=now,
                attempts=JobRecord.attempts + 1)


def next_queued(session: Session) -> int | None:
    """The oldest queued job's id (SQLite's in-process runner takes jobs in order)."""
    return session.scalar(select(JobRecord.id).where(JobRecord.status == QUEUED).order_by(JobRecord.id).limit(1))


def requeue_stale(session: Session, stale_after_s: float) -> int:
    """Queue again the running jobs whose worker sent no heartbeat for ``stale_after_s`` seconds
    (it was killed); return how many."""
    cutoff = utcnow() - dt.timedelta(seconds=stale_after_s)
    result = session.execute(update(JobRecord).where(JobRecord.status == RUNNING, JobRecord.heartbeat_at < cutoff)
                             .values(status=QUEUED))
    return result.rowcount


def beat(session: Session, job_id: int) -> None:
    _set(session, job_id, (RUNNING,), heartbeat_at=utcnow())


def record_progress(session: Session, job_id: int, progress: dict[str, Any], log_tail: list[str]) -> bool:
    """Store the running job's progress and log tail; True when its cancellation was asked."""
    _set(session, job_id, (RUNNING,), progress=progress, log_tail=log_tail, heartbeat_at=utcnow())
    return bool(session.scalar(select(JobRecord.cancel_requested).where(JobRecord.id == job_id)))


def finish(session: Session, job_id: int, status: str, states: tuple[str, ...] = (RUNNING,), **values: Any) -> None:
    """End the job (running, unless ``states`` say otherwise) with ``status`` (``profile_id``,
    ``error``, ``progress``, ``log_tail`` as known)."""
    assert status in FINAL, status
    _set(session, job_id, states, status=status, finished_at=utcnow(), **values)


def _set(session: Session, job_id: int, states: tuple[str, ...], *conditions: Any, **values: Any) -> bool:
    """One conditional UPDATE of job ``job_id`` while its status is in ``states`` (and ``conditions``
    hold); True when it matched."""
    result = session.execute(update(JobRecord).where(JobRecord.id == job_id, JobRecord.status.in_(states), *conditions)
                             .values(**values))
    return result.rowcount == 1
