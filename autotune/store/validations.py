"""Writes and reads of ``autotune_validation_runs`` (:class:`~autotune.store.tables.ValidationRunRecord`),
in plain values: the result document is the caller's (:mod:`autotune.validation.results`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from autotune.store.tables import ValidationRunRecord


@dataclass(frozen=True)
class ValidationRun:
    """One validation of profile ``profile_id`` to store: the engine (and its version) that served it,
    its rounds and concurrency levels, the caller's result document and, when known, its time."""

    profile_id: int
    engine: str
    engine_version: str
    runs: int
    concurrency: Sequence[int]
    result: Mapping[str, Any]
    created_at: dt.datetime | None = None


def add_validation(session: Session, run: ValidationRun) -> ValidationRunRecord:
    """Store ``run``; the row (with its id) is returned flushed."""
    record = ValidationRunRecord(profile_id=run.profile_id, engine=run.engine, engine_version=run.engine_version,
                                 runs=run.runs, concurrency=[int(c) for c in run.concurrency], result=dict(run.result))
    if run.created_at is not None:
        record.created_at = run.created_at
    session.add(record)
    session.flush()
    return record


def profile_validations(session: Session, profile_id: int) -> list[ValidationRunRecord]:
    """The validations of profile ``profile_id``, newest first."""
    query = (select(ValidationRunRecord).where(ValidationRunRecord.profile_id == profile_id)
             .order_by(ValidationRunRecord.created_at.desc(), ValidationRunRecord.id.desc()))
    return list(session.scalars(query))
