"""Databases kept open by a server (autotune.store.shared): one engine per URL inside ``active()``,
the schema still checked on every open, and nothing changed outside it (the CLI's behaviour)."""

from __future__ import annotations

import threading

import pytest

from autotune import api
from autotune.errors import DatabaseError
from autotune.store import open_database
from autotune.store.shared import SharedDatabases


def test_one_engine_per_url_while_active(db_url: str) -> None:
    shared = SharedDatabases()
    with shared.active():
        with open_database(db_url) as first:
            pass  # closing at the end of a call leaves a shared engine open
        with open_database(db_url) as second, second.session() as session:
            assert session.connection().exec_driver_sql("SELECT 1").scalar() == 1
    assert first.engine is second.engine
    shared.close()
    assert first.engine.pool.checkedin() == 0  # closed with the set


def test_outside_active_each_open_has_its_own_engine(db_url: str) -> None:
    shared = SharedDatabases()
    with shared.active():
        kept = open_database(db_url)
    with open_database(db_url) as own:
        assert own.engine is not kept.engine and not own.shared
    shared.close()


def test_other_threads_are_not_affected(db_url: str) -> None:
    """The set is active in the context that entered it only, not process-wide."""
    shared = SharedDatabases()
    engines = []
    with shared.active():
        kept = open_database(db_url)
        thread = threading.Thread(target=lambda: engines.append(open_database(db_url)))
        thread.start()
        thread.join()
    assert engines[0].engine is not kept.engine
    engines[0].close()
    shared.close()


def test_schema_is_checked_on_every_open(db_url: str) -> None:
    """A database migrated under a running server is refused as a CLI command refuses it."""
    shared = SharedDatabases()
    with shared.active():
        open_database(db_url)
    api.db_downgrade(db_url, "0005_performance_model")  # as another process would
    with shared.active(), pytest.raises(DatabaseError, match="older than this autotune"):
        open_database(db_url)
    shared.close()


def test_a_database_that_fails_to_open_is_tried_again(tmp_path) -> None:  # noqa: ANN001 - pytest's Path
    url = f"sqlite:///{tmp_path / 'later' / 'autotune.db'}"
    shared = SharedDatabases()
    with shared.active():
        with pytest.raises(DatabaseError, match="does not exist"):
            open_database(url)
        (tmp_path / "later").mkdir()
        assert open_database(url).shared
    shared.close()
