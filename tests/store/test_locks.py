"""The named database lock excludes other holders (threads here; processes and machines alike)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from autotune.errors import DatabaseError
from autotune.store import database, migrate, open_database
from autotune.store.locks import backoff, lock_key, named_lock


def test_a_second_holder_waits_for_the_first(db_url) -> None:
    events: list[str] = []
    first_holds = threading.Event()
    with open_database(db_url) as database:

        def first() -> None:
            with named_lock(database.engine, "study-a"):
                events.append("first in")
                first_holds.set()
                time.sleep(0.5)
                events.append("first out")

        def second() -> None:
            first_holds.wait()
            with named_lock(database.engine, "study-a"):
                events.append("second in")

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    assert events == ["first in", "first out", "second in"]


def test_lock_keys_are_stable_signed_64_bit_integers() -> None:
    assert lock_key("tiny") == lock_key("tiny") != lock_key("tiny2")
    assert -(2**63) <= lock_key("tiny") < 2**63


HOLD_SQLITE_LOCK = """
import fcntl, sqlite3, sys, time
path, kind = sys.argv[1], sys.argv[2]
if kind == "file":  # SQLite itself, mid-write: an exclusive lock on a rollback-journal file
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("CREATE TABLE IF NOT EXISTS held (x)")
    connection.execute("BEGIN EXCLUSIVE")
else:  # another process's migration: the schema lock file
    handle = open(path + ".lock", "a+")
    fcntl.flock(handle, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


@pytest.fixture
def held_sqlite(tmp_path: Path) -> Iterator[Callable[[str], tuple[str, int]]]:
    """Start a process holding ``kind`` ("file": the database file, "schema": the migration lock)
    of a new SQLite file; yields (url, pid)."""
    holders: list[subprocess.Popen] = []

    def hold(kind: str) -> tuple[str, int]:
        path = tmp_path / f"held-{kind}.db"
        holder = subprocess.Popen([sys.executable, "-c", HOLD_SQLITE_LOCK, str(path), kind], stdout=subprocess.PIPE,
                                  text=True)
        holders.append(holder)
        assert holder.stdout.readline().strip() == "held"
        return f"sqlite:///{path}", holder.pid

    yield hold
    for holder in holders:
        holder.kill()
        holder.wait()


def test_a_locked_sqlite_file_is_one_line_naming_the_file_and_its_holder(held_sqlite, monkeypatch) -> None:
    monkeypatch.setattr(database, "SQLITE_BUSY_TIMEOUT_MS", 300)
    url, pid = held_sqlite("file")
    with pytest.raises(DatabaseError) as caught:
        open_database(url)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"cannot connect to database {url!r}: database is locked after 0.3 s: held by "
                              f"process {pid} ({sys.executable} -c import fcntl, sqlite3, sys, time path, kind =")
    assert message.endswith("; retry once it has finished, or stop it")


def test_a_migration_that_outlasts_the_timeout_names_its_holder(held_sqlite, monkeypatch) -> None:
    monkeypatch.setattr(migrate, "SCHEMA_LOCK_TIMEOUT_S", 0.3)
    url, pid = held_sqlite("schema")
    with pytest.raises(DatabaseError, match=rf"gave up after 0.3 s waiting for the autotune-schema lock "
                                            rf"\(.*held-schema.db.lock\): held by process {pid} \("):
        open_database(url)


@pytest.mark.postgres
def test_a_held_advisory_lock_names_the_server_process(empty_postgres_url: str, monkeypatch) -> None:
    monkeypatch.setattr(migrate, "SCHEMA_LOCK_TIMEOUT_S", 0.3)
    with open_database(empty_postgres_url, migrate=False) as database, database.engine.connect() as holder:
        holder.execute(text("SELECT pg_advisory_lock(:key)"), {"key": lock_key(migrate.SCHEMA_LOCK)})
        pid = holder.execute(text("SELECT pg_backend_pid()")).scalar()
        with pytest.raises(DatabaseError, match=rf"waiting for the autotune-schema lock on the database: "
                                                rf"held by server process {pid} \("):
            migrate.upgrade(database.engine)
        holder.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": lock_key(migrate.SCHEMA_LOCK)})
        assert migrate.upgrade(database.engine).is_head  # free again: the timed-out wait left nothing behind


def test_backoff_tries_until_the_deadline_and_then_stops() -> None:
    started = time.monotonic()
    tries = sum(1 for _ in backoff(0.2))
    assert 2 <= tries and 0.2 <= time.monotonic() - started < 1.0
