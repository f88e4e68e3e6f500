"""Queries and writes on the profile database, in terms of plain values (no engine or torch types)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from autotune.store.tables import HardwareRecord, ProbeRecord
from autotune.store.rows import get_or_create


def upsert_hardware(
    session: Session,
    *,
    fingerprint: str,
    name: str,
    device_type: str,
    device_count: int,
    memory_total_bytes: int,
    spec: Mapping[str, Any],
) -> HardwareRecord:
    """The hardware row for ``fingerprint``, created on first sight (race-free: store/rows.py);
    static facts refreshed."""
    facts = {"name": name, "device_type": device_type, "device_count": device_count,
             "memory_total_bytes": memory_total_bytes, "spec": dict(spec)}
    record = get_or_create(session, HardwareRecord, {"fingerprint": fingerprint}, facts)
    record.name = name
    record.device_type = device_type
    record.device_count = device_count
    record.memory_total_bytes = memory_total_bytes
    record.spec = dict(spec)
    return record


def add_probe(
    session: Session,
    hardware: HardwareRecord,
    *,
    method_version: int,
    quick: bool,
    duration_s: float,
    metrics: Sequence[Mapping[str, Any]],
) -> ProbeRecord:
    """Store one probe's measured values under its hardware row."""
    probe = ProbeRecord(
        hardware=hardware,
        method_version=method_version,
        quick=quick,
        duration_s=duration_s,
        metrics=[dict(m) for m in metrics],
    )
    session.add(probe)
    session.flush()
    return probe


def find_hardware(session: Session, key: str) -> HardwareRecord | None:
    """A hardware row by fingerprint (or a unique prefix of it) or exact name."""
    record = session.scalar(select(HardwareRecord).where(HardwareRecord.fingerprint == key))
    if record is not None:
        return record
    by_prefix = session.scalars(
        select(HardwareRecord).where(HardwareRecord.fingerprint.startswith(key)).limit(2)
    ).all()
    if len(by_prefix) == 1:
        return by_prefix[0]
    return session.scalar(
        select(HardwareRecord).where(HardwareRecord.name == key).order_by(HardwareRecord.id.desc())
    )


def latest_probe(session: Session, hardware: HardwareRecord) -> ProbeRecord | None:
    """The most recent probe of ``hardware``."""
    return session.scalar(
        select(ProbeRecord)
        .where(ProbeRecord.hardware_id == hardware.id)
        .order_by(ProbeRecord.id.desc())
        .limit(1)
    )


def list_hardware(session: Session) -> list[HardwareRecord]:
    """Every stored machine kind, newest first."""
    return list(session.scalars(select(HardwareRecord).order_by(HardwareRecord.id.desc())))
