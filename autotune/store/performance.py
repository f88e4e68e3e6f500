"""Writes and queries of the performance model's profiles: acceptance and step costs.

A trial's speed is predicted from two things that vary with different inputs, so they are stored
apart: how often a proposer's drafts are accepted (target, proposer, workload: the same on every
machine; :class:`AcceptanceProfileRecord`) and what an engine step costs (machine kind, engine,
target and the caller's ``key``; :class:`CostProfileRecord`). A measurement taken on one machine
then improves predictions on all others, and a new machine needs only its step costs.

Plain values in, records out; the store neither pools acceptance counts nor reads cost points: the
caller pools (``sources`` lists the measurements already in ``positions``, so that a re-save never
counts one twice) and owns the points' format. No engine, Optuna or torch types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from autotune.store.tables import AcceptanceProfileRecord, CostProfileRecord, utcnow
from autotune.store.rows import get_or_create

COST_SOURCES = ("timed", "roofline")


@dataclass(frozen=True)
class AcceptanceKey:
    """What identifies an acceptance profile: one per target, proposer and workload."""

    target_model_id: int
    proposer: str
    workload_fingerprint: str


@dataclass(frozen=True)
class CostProfileKey:
    """What identifies a cost profile: one per machine kind, engine, target and the caller's ``key``."""

    hardware_id: int
    engine: str
    target_model_id: int
    key: str


# -- acceptance ---------------------------------------------------------------------------------


def find_acceptance(session: Session, key: AcceptanceKey) -> AcceptanceProfileRecord | None:
    """The acceptance profile saved under ``key``, if any."""
    return session.scalar(
        select(AcceptanceProfileRecord).where(
            AcceptanceProfileRecord.target_model_id == key.target_model_id,
            AcceptanceProfileRecord.proposer == key.proposer,
            AcceptanceProfileRecord.workload_fingerprint == key.workload_fingerprint,
        )
    )


def save_acceptance(
    session: Session,
    key: AcceptanceKey,
    *,
    draft_model_id: int | None,
    workload_name: str,
    max_depth: int,
    positions: Sequence[Mapping[str, Any]],
    sources: Sequence[int],
) -> AcceptanceProfileRecord:
    """Create or replace the profile under ``key``: ``positions`` and ``sources`` are the caller's
    pooled totals and replace the stored ones (nothing is added up here)."""
    if len(positions) != max_depth:
        raise ValueError(f"{len(positions)} positions for max_depth {max_depth}: one entry per draft position")
    record = get_or_create(session, AcceptanceProfileRecord, asdict(key),
                              {"workload_name": workload_name, "max_depth": max_depth})
    record.draft_model_id = draft_model_id
    record.workload_name = workload_name
    record.max_depth = max_depth
    record.positions = [dict(position) for position in positions]
    record.sources = list(sources)
    # Set explicitly: onupdate fires only when a column changed, and a re-save of equal counts
    # still says "this profile was confirmed now".
    record.updated_at = utcnow()
    session.flush()
    return record


def acceptance_profiles(
    session: Session, *, target_model_id: int | None = None, workload_fingerprint: str | None = None
) -> list[AcceptanceProfileRecord]:
    """Saved acceptance profiles, most recently updated first, optionally of one target or workload."""
    query = select(AcceptanceProfileRecord)
    if target_model_id is not None:
        query = query.where(AcceptanceProfileRecord.target_model_id == target_model_id)
    if workload_fingerprint is not None:
        query = query.where(AcceptanceProfileRecord.workload_fingerprint == workload_fingerprint)
    query = query.order_by(AcceptanceProfileRecord.updated_at.desc(), AcceptanceProfileRecord.id.desc())
    return list(session.scalars(query))


# -- step costs ---------------------------------------------------------------------------------


def find_cost_profile(session: Session, key: CostProfileKey) -> CostProfileRecord | None:
    """The step costs saved under ``key``, if any."""
    return session.scalar(
        select(CostProfileRecord).where(
            CostProfileRecord.hardware_id == key.hardware_id,
            CostProfileRecord.engine == key.engine,
            CostProfileRecord.target_model_id == key.target_model_id,
            CostProfileRecord.key == key.key,
        )
    )


def save_cost_profile(
    session: Session,
    key: CostProfileKey,
    *,
    source: str,
    points: Sequence[Mapping[str, Any]],
    settings: Mapping[str, Any],
    duration_s: float | None,
) -> CostProfileRecord:
    """Create or replace the step costs under ``key``; a replaced profile counts as new
    (``created_at`` is now), so that listings show the costs in use first."""
    if source not in COST_SOURCES:
        raise ValueError(f"unknown cost profile source {source!r}")
    record = get_or_create(session, CostProfileRecord, asdict(key), {"source": source})
    record.source = source
    record.points = [dict(point) for point in points]
    record.settings = dict(settings)
    record.duration_s = duration_s
    record.created_at = utcnow()
    session.flush()
    return record


def cost_profiles(
    session: Session, *, hardware_id: int | None = None, target_model_id: int | None = None
) -> list[CostProfileRecord]:
    """Saved cost profiles, newest first, optionally of one machine kind or target."""
    query = select(CostProfileRecord)
    if hardware_id is not None:
        query = query.where(CostProfileRecord.hardware_id == hardware_id)
    if target_model_id is not None:
        query = query.where(CostProfileRecord.target_model_id == target_model_id)
    query = query.order_by(CostProfileRecord.created_at.desc(), CostProfileRecord.id.desc())
    return list(session.scalars(query))
