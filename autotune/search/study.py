"""Opening a study: the Optuna study in the same database (RDB storage, so optuna-dashboard can
open it) and our study row, created on first use and checked on every later one.

A study is continued only by a run with the same identity (engine, hardware, target, workload,
objective, SLOs and search space, see :meth:`StudySetup.identity`); anything else is a
ConfigurationError raised before this run writes a row. An Optuna study of the same name that
autotune did not create (its ``autotune_identity`` user attribute differs) is refused likewise.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from sqlalchemy.exc import SQLAlchemyError

from autotune.errors import ConfigurationError
from autotune.search.options import TuneOptions
from autotune.search.setup import StudySetup
from autotune.store import Database, repository, results
from autotune.store.database import (
    database_error,
    engine_options,
    keep_reconnecting,
    lost_connection_behind,
    parse_database_url,
)
from autotune.store.locks import named_lock
from autotune.store.tables import StudyRecord

IDENTITY_ATTR = "autotune_identity"


def optuna_storage(database: Database, options: TuneOptions) -> RDBStorage:
    """Optuna's RDB storage on our database URL, with heartbeats so dead workers' trials are
    retried, and our engine's connection handling (busy timeout, surviving a server restart)."""
    url = parse_database_url(database.url)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        storage = RDBStorage(
            url.render_as_string(hide_password=False),
            engine_kwargs=engine_options(url),
            heartbeat_interval=options.heartbeat_interval_s,
            grace_period=options.grace_period_s or 2 * options.heartbeat_interval_s,
            heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=options.max_retry),
        )
    keep_reconnecting(storage.engine)
    return storage


@contextmanager
def storage_errors(database: Database) -> Iterator[None]:
    """Turn a lost database connection met anywhere in the block (our queries, Optuna's storage,
    a lock) into the one-line DatabaseError of :func:`database_error`. Optuna wraps it in a
    StorageInternalError that blames invalid data, or in a PendingRollbackError where it queried
    the dead connection again (:func:`lost_connection_behind`); other errors pass unchanged."""
    try:
        yield
    except (optuna.exceptions.StorageInternalError, SQLAlchemyError) as exc:
        if lost_connection_behind(exc) is None:
            raise
        raise database_error(database.display_url, exc) from exc


def open_study(
    database: Database, storage: RDBStorage, setup: StudySetup, sampler: optuna.samplers.BaseSampler
) -> tuple[int, optuna.Study]:
    """Our study id and the Optuna study for ``setup``, created on first use (see the module doc)."""
    with named_lock(database.engine, setup.name):
        with database.session() as session:
            record = results.find_study(session, setup.name)
            if record is not None:
                _check_identity(_stored_identity(record), setup)
        existing = setup.name in optuna.get_all_study_names(storage)
        if existing:
            study = optuna.load_study(study_name=setup.name, storage=storage, sampler=sampler)
            digest, legacy = setup.identity_digests
            stored = study.user_attrs.get(IDENTITY_ATTR)
            if stored == legacy:  # made before the axis was named concurrency (issue 38): same identity
                study.set_user_attr(IDENTITY_ATTR, digest)
            elif stored != digest:
                raise ConfigurationError(
                    f"an Optuna study named {setup.name!r} already exists in this database and was not created by "
                    "this autotune search (or with other options); pick another --study"
                )
        else:
            study = optuna.create_study(study_name=setup.name, storage=storage, sampler=sampler,
                                        directions=setup.objective.directions)
            study.set_user_attr(IDENTITY_ATTR, setup.identity_digest)
        if record is None:
            record_id = _create_record(database, setup)
        else:
            record_id = record.id
    return record_id, study


def _create_record(database: Database, setup: StudySetup) -> int:
    hardware = setup.hardware
    with database.session() as session:
        hardware_row = repository.upsert_hardware(
            session, fingerprint=hardware.fingerprint, name=hardware.name, device_type=hardware.device_type,
            device_count=hardware.device_count, memory_total_bytes=hardware.memory_total_bytes, spec=hardware.spec,
        )
        repository.add_probe(
            session, hardware_row, method_version=hardware.method_version, quick=hardware.quick,
            duration_s=hardware.duration_s, metrics=[metric.to_dict() for metric in hardware.metrics],
        )
        target = results.upsert_model(session, setup.target.model_entry())
        for draft in setup.drafts.values():
            results.upsert_model(session, draft.model_entry())
        record = results.create_study(
            session, results.StudyEntry(
                name=setup.name, optuna_study_name=setup.name, hardware=hardware_row, target=target, engine=setup.engine,
                objective=setup.objective.kind, search_space=setup.search_space_record(),
                slo=setup.objective.slo.to_dict(), workload_name=setup.workload.label,
                workload_fingerprint=setup.workload.sha256,
            ),
        )
        return record.id


def _stored_identity(record: StudyRecord) -> dict[str, Any]:
    return {
        "engine": record.engine,
        "hardware": record.hardware.fingerprint,
        "target": record.target_model.fingerprint,
        "workload": record.workload_fingerprint,
        "objective": record.objective,
        "slo": record.slo,
        "search_space": record.search_space,
    }


def _check_identity(stored: dict[str, Any], setup: StudySetup) -> None:
    wanted = setup.identity()
    for key, value in wanted.items():
        if stored.get(key) != value:
            raise ConfigurationError(
                f"study {setup.name!r} exists with a different {key.replace('_', ' ')} "
                f"(stored {_short(stored.get(key))}, now {_short(value)}); rerun it with its original options "
                "or pick another --study"
            )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
