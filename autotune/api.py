"""The library behind every CLI command: each command parses, calls one function here, prints.

Python users call the same functions::

    from autotune import api
    result = api.probe(quick=True)            # measure this machine and store the profile
    print(result.profile.name, result.probe_id)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autotune.store import SchemaStatus, open_database

if TYPE_CHECKING:  # the hardware package imports torch; load it only when probing
    from autotune.hardware import HardwareProfile


@dataclass(frozen=True)
class ProbeResult:
    """A measured hardware profile and where it was stored (ids are None with ``store=False``)."""

    profile: HardwareProfile
    hardware_id: int | None
    probe_id: int | None
    database: str | None

    def to_dict(self) -> dict:
        return {
            **self.profile.to_dict(),
            "hardware_id": self.hardware_id,
            "probe_id": self.probe_id,
            "database": self.database,
        }


def probe(
    db_url: str | None = None,
    *,
    quick: bool = False,
    device: str = "auto",
    store: bool = True,
    progress: Callable[[str], None] | None = None,
) -> ProbeResult:
    """Measure this machine and store the hardware profile.

    The database is opened (and checked) before measuring, so a bad URL fails at once and a
    failed probe writes nothing.
    """
    from autotune.hardware import probe_hardware
    from autotune.store import repository

    if not store:
        return ProbeResult(probe_hardware(quick=quick, device=device, progress=progress), None, None, None)
    with open_database(db_url) as database:
        profile = probe_hardware(quick=quick, device=device, progress=progress)
        with database.session() as session:
            hardware = repository.upsert_hardware(
                session,
                fingerprint=profile.fingerprint,
                name=profile.name,
                device_type=profile.device_type,
                device_count=profile.device_count,
                memory_total_bytes=profile.memory_total_bytes,
                spec=profile.spec,
            )
            record = repository.add_probe(
                session,
                hardware,
                method_version=profile.method_version,
                quick=profile.quick,
                duration_s=profile.duration_s,
                metrics=[metric.to_dict() for metric in profile.metrics],
            )
            return ProbeResult(profile, hardware.id, record.id, database.display_url)


def db_status(db_url: str | None = None) -> SchemaStatus:
    """The database's revision against the newest this autotune ships (nothing is written)."""
    return _on_schema(db_url, "schema_status")


def db_upgrade(db_url: str | None = None, revision: str = "head") -> SchemaStatus:
    """Migrate the database up to ``revision``."""
    return _on_schema(db_url, "upgrade", revision)


def db_downgrade(db_url: str | None, revision: str) -> SchemaStatus:
    """Migrate the database down to ``revision`` ("base" drops every autotune table)."""
    return _on_schema(db_url, "downgrade", revision)


def _on_schema(db_url: str | None, action: str, *args: str) -> SchemaStatus:
    """Run one of autotune.store.migrate's functions on the database, leaving the schema alone otherwise."""
    from autotune.store import migrate

    with open_database(db_url, migrate=False) as database:
        return getattr(migrate, action)(database.engine, *args)
