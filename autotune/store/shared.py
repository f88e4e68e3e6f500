"""Databases kept open across calls, for a long-running server.

A CLI command opens the database, checks its schema and closes it again (:func:`autotune.store.open_database`).
A server answering many requests paid that per request: a new engine, a new connection and, since
SQLAlchemy keeps its compiled statements per engine, every query compiled again (about 45 ms a
request on SQLite, most of its time). Inside :meth:`SharedDatabases.active` ``open_database`` hands
out one engine per URL instead, opened on first use and kept until :meth:`SharedDatabases.close`.
The schema revision is still read on every open (one small query), so a database migrated under a
running server is refused as before. Outside ``active()`` (the CLI, the worker, the tests) nothing
changes.

The active set is a context variable: a server sets it around each request, and Starlette copies it
into the thread that runs the route, so other code in the same process is never affected.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from autotune.store.database import Database, create_db_engine

_ACTIVE: ContextVar[SharedDatabases | None] = ContextVar("autotune_shared_databases", default=None)


def active() -> SharedDatabases | None:
    """The databases kept open for the current request, None outside :meth:`SharedDatabases.active`."""
    return _ACTIVE.get()


class SharedDatabases:
    """Open databases by resolved URL, each opened once and closed together by :meth:`close`."""

    def __init__(self) -> None:
        self._open: dict[str, Database] = {}
        # Two first requests must not both create an engine for one URL (one would never be closed).
        self._lock = threading.Lock()

    def get(self, resolved_url: str, *, create_parent: bool) -> Database:
        """The open database at ``resolved_url``; opened now if it is not yet. A database that
        cannot be opened raises (DatabaseError) and is tried again on the next call."""
        with self._lock:
            database = self._open.get(resolved_url)
            if database is None:
                engine = create_db_engine(resolved_url, create_parent=create_parent)
                database = self._open[resolved_url] = Database(resolved_url, engine, shared=True)
            return database

    @contextmanager
    def active(self) -> Iterator[None]:
        """Within the block, :func:`autotune.store.open_database` uses these databases."""
        token = _ACTIVE.set(self)
        try:
            yield
        finally:
            _ACTIVE.reset(token)

    def close(self) -> None:
        """Close every engine (their pooled connections); the next :meth:`get` opens afresh."""
        with self._lock:
            databases, self._open = list(self._open.values()), {}
        for database in databases:
            database.engine.dispose()
