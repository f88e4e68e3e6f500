"""A named lock shared by every process using the database: short critical sections of
distributed tuning (counting a study's trials before asking for one, replacing its profile).

PostgreSQL: a session-level advisory lock, keyed by a hash of the name, so workers on several
machines exclude each other; the server drops it if the holder dies, or loses its connection to
a server restart (the rest of that block then runs unprotected: at worst a race of the kind the
lock prevents, such as one trial over the budget, never a lost row). SQLite (one machine by
nature): an exclusive ``flock`` on a file beside the database, dropped by the kernel if the holder
dies. An in-memory SQLite database lives in one process: a thread lock is enough.
"""

from __future__ import annotations

import fcntl
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

_MEMORY_LOCK = threading.Lock()


def lock_key(name: str) -> int:
    """A signed 64-bit key for ``name`` (PostgreSQL advisory locks take a bigint)."""
    digest = hashlib.sha256(f"autotune:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextmanager
def named_lock(engine: Engine, name: str) -> Iterator[None]:
    """Hold the database-wide lock called ``name`` for the duration of the block (SQLite: one
    lock per database file, whatever the name)."""
    url = engine.url
    if url.get_backend_name() == "postgresql":
        with _advisory_lock(engine, lock_key(name)):
            yield
    elif url.database and url.database != ":memory:":
        with open(f"{url.database}.lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
    else:
        with _MEMORY_LOCK:
            yield


@contextmanager
def _advisory_lock(engine: Engine, key: int) -> Iterator[None]:
    with engine.connect() as connection:
        connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
        connection.commit()
        try:
            yield
        finally:
            try:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                connection.commit()
            except DBAPIError as exc:
                # The server ends a session's advisory locks with the session: a connection lost
                # while holding the lock (server restarted) left nothing to release.
                if not exc.connection_invalidated:
                    raise
