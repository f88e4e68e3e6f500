"""The SQL behind ``autotune plan``: the stored target, hardware, acceptance profiles, measured
output lengths and timed cost profiles a what-if plan rests on.

Functions take an open session and return ORM records or plain values; the plan's math and its
dataclasses stay in :mod:`autotune.planning` (the store imports nothing above it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from autotune.errors import ConfigurationError, NotFoundError
from autotune.store import performance, profile_queries, repository
from autotune.store.tables import (
    AcceptanceProfileRecord,
    CostProfileRecord,
    HardwareRecord,
    MeasurementRecord,
    ModelRecord,
    ProbeRecord,
)
from autotune.workload import first_cycle

DRAFT_PREFIX = "draft:"


def find_target(session: Session, key: str, workload_fingerprint: str) -> ModelRecord:
    """The stored target model named (or fingerprinted) ``key``; among several of one name, the one
    with acceptance profiles on the workload. ConfigurationError when none or several remain."""
    found = [m for m in profile_queries.find_models(session, key.strip()) if m.role == "target"]
    if not found:
        stored = list(session.scalars(select(ModelRecord).where(ModelRecord.role == "target").order_by(ModelRecord.id)))
        known = profile_queries.stored_names(stored) if stored else "none yet: run `autotune tune` first"
        raise NotFoundError(f"unknown target model {key!r}; stored targets: {known}")
    if len(found) == 1:
        return found[0]
    with_profiles = [m for m in found if session.scalar(select(AcceptanceProfileRecord.id).where(
        AcceptanceProfileRecord.target_model_id == m.id,
        AcceptanceProfileRecord.workload_fingerprint == workload_fingerprint).limit(1)) is not None]
    if len(with_profiles) == 1:
        return with_profiles[0]
    raise ConfigurationError(f"{len(found)} stored targets are named {key!r}: "
                             f"{profile_queries.stored_names(found)}; pass a fingerprint instead")


def acceptance_workload_names(session: Session, target_model_id: int) -> list[str]:
    """The workloads the target has acceptance profiles on, by name, sorted."""
    return sorted({r.workload_name for r in performance.acceptance_profiles(session, target_model_id=target_model_id)})


def proposer_drafts(
    session: Session, records: Sequence[AcceptanceProfileRecord]
) -> tuple[dict[int, ModelRecord], dict[str, ModelRecord]]:
    """The draft models of the ``draft:`` acceptance profiles: by model id, and by the fingerprint in
    the proposer (a profile whose draft row id is unset names its draft there only)."""
    by_id = profile_queries.models_by_id(session, {r.draft_model_id for r in records if r.draft_model_id is not None})
    by_fingerprint = profile_queries.models_by_fingerprint(
        session, [r.proposer.removeprefix(DRAFT_PREFIX) for r in records if r.proposer.startswith(DRAFT_PREFIX)])
    return by_id, by_fingerprint


def measured_request_tokens(session: Session, measurement_ids: Iterable[int], requests: int) -> list[int] | None:
    """The output tokens per request of the newest of these measurements that stored one valid
    count for each of the workload's ``requests`` (a run's stream holds them in whole cycles: its
    first cycle), or None."""
    for measurement_id in sorted(set(measurement_ids), reverse=True):
        measurement = session.get(MeasurementRecord, measurement_id)
        stored = ((measurement.extra or {}).get("measurement") or {}).get("request_tokens") if measurement else None
        tokens = first_cycle(stored, requests) if isinstance(stored, list) else None
        if tokens and all(isinstance(t, int) and t >= 1 for t in tokens):
            return tokens
    return None


def hardware_with_probe(session: Session, key: str) -> tuple[HardwareRecord, ProbeRecord | None] | None:
    """The one stored hardware profile named (or fingerprinted) ``key`` and its latest probe; None
    when there is not exactly one."""
    found = profile_queries.find_hardware(session, key.strip())
    if len(found) != 1:
        return None
    return found[0], repository.latest_probe(session, found[0])


def stored_hardware_names(session: Session) -> str:
    """Every stored hardware profile as "name (fingerprint), ..." for messages, or "none"."""
    return profile_queries.stored_names(repository.list_hardware(session))


def gpu_name(record: HardwareRecord) -> str | None:
    """The NVML name of the GPU a stored CUDA hardware profile benchmarked, or None."""
    spec = record.spec or {}
    devices = spec.get("devices") or []
    index = spec.get("benchmarked_device", 0)
    if record.device_type != "cuda" or not devices or index >= len(devices):
        return None
    return str(devices[index].get("name", "")).strip()


def probed_bandwidth_fraction(session: Session, nvml_name: str) -> tuple[float, str] | None:
    """The copy bandwidth the newest probe of a stored GPU called ``nvml_name`` measured, as a share
    of the peak it recorded, and which probe that was; None when no such probe is stored."""
    for record in repository.list_hardware(session):  # newest first
        if gpu_name(record) != nvml_name:
            continue
        probe = repository.latest_probe(session, record)
        copy = next((m for m in (probe.metrics if probe else []) if m.get("name") == "copy_bw_gbps"), None)
        if copy and copy.get("measured") and copy.get("peak"):
            return float(copy["measured"]) / float(copy["peak"]), f"probe {probe.id} of {record.name} ({record.fingerprint})"
    return None


def timed_cost_profiles(session: Session, nvml_name: str, engine: str) -> list[CostProfileRecord]:
    """The timed cost profiles (a tune's timing runs) of ``engine`` on stored GPUs called
    ``nvml_name``, newest first."""
    found = [record for hardware in repository.list_hardware(session) if gpu_name(hardware) == nvml_name
             for record in performance.cost_profiles(session, hardware_id=hardware.id)
             if record.engine == engine and record.source == "timed"]
    return sorted(found, key=lambda record: (record.created_at, record.id), reverse=True)
