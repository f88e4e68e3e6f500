"""Opening the profile database: URL resolution, engine set-up, error translation.

The URL comes from ``--db``, else ``AUTOTUNE_DB_URL``, else an SQLite file in the user's data
directory (zero configuration). SQLite is set up for several processes at once (tuning workers,
a dashboard): write-ahead logging, a generous busy timeout, foreign keys on. PostgreSQL
connections survive a server restart: dead pooled connections are replaced before use and new
ones are retried for a bounded time; an operation cut off mid-way fails with a one-line message.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from autotune.errors import DatabaseError
from autotune.store.locks import backoff, describe_holders, file_lock_holders

ENV_DB_URL = "AUTOTUNE_DB_URL"
SQLITE_BUSY_TIMEOUT_MS = 30_000
# How long a server that went away after we reached it (a restart, a failover) is waited for.
RECONNECT_WINDOW_S = 30.0


def user_data_dir() -> Path:
    """Where autotune keeps its default database: ``$XDG_DATA_HOME/autotune`` or ``~/.local/share/autotune``."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return Path(base) / "autotune"


def default_database_url() -> str:
    """The zero-configuration database: an SQLite file in the user's data directory."""
    return f"sqlite:///{user_data_dir() / 'autotune.db'}"


def resolve_database_url(url: str | None) -> str:
    """``url`` if given, else ``$AUTOTUNE_DB_URL``, else :func:`default_database_url`."""
    return url or os.environ.get(ENV_DB_URL) or default_database_url()


SUPPORTED_BACKENDS = ("sqlite", "postgresql")
URL_EXAMPLES = "expected e.g. sqlite:///path/to/autotune.db or postgresql://user@host:5432/dbname"


def parse_database_url(url: str) -> URL:
    """Parse and normalise a URL; a bare ``postgresql://`` uses psycopg 3, the driver we ship.
    DatabaseError (never showing a password) for a URL that is malformed, has a non-numeric port
    or names a database other than SQLite and PostgreSQL."""
    if "\0" in url:  # a file name or libpq would cut the URL there, and use what is left
        raise DatabaseError(f"malformed database URL {mask_password(url)!r}: it holds a NUL character")
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise DatabaseError(f"malformed database URL {mask_password(url)!r}: {URL_EXAMPLES}") from None
    except ValueError:  # make_url converts the port with int()
        raise DatabaseError(f"malformed database URL {mask_password(url)!r}: the port must be a number; "
                            f"{URL_EXAMPLES}") from None
    if "@" in (parsed.host or ""):  # SQLAlchemy ends the password at the first "@": the rest would show as host
        raise DatabaseError(f"malformed database URL {mask_password(url)!r}: write an '@' in the password as %40")
    if parsed.get_backend_name() not in SUPPORTED_BACKENDS:
        raise DatabaseError(f"unsupported database URL {display_url(parsed)!r}: use sqlite:/// or postgresql://")
    if parsed.get_backend_name() == "sqlite" and (parsed.username or parsed.password or parsed.host):
        # SQLAlchemy would quietly drop them and open a file relative to the current folder.
        raise DatabaseError(f"malformed database URL {display_url(parsed)!r}: an SQLite URL has no user, password "
                            "or host; write sqlite:///relative/path.db or sqlite:////absolute/path.db")
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


# A scheme as typed, well-formed or not: "postgresql://", "postgresql:/", "postgresql:", "postgresql//".
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*(?::/{0,2}|/{1,2})")
_QUERY_PASSWORD = re.compile(r"(password=)[^&#\s]*", re.IGNORECASE)
_NOT_A_PORT = re.compile(r":(?!\d*(?:[/?#]|$))[^/?#]*")


def mask_password(text: str) -> str:
    """``text`` (a URL too malformed to parse, which SQLAlchemy cannot render without its password)
    with its password replaced by ``***``: everything from the first ``:`` after the scheme up to the
    last ``@`` (a typed password may hold ``:``, ``/``, ``@`` or spaces; with no ``:`` there, all of
    it, since it may be the password without a user); without an ``@`` (``user:password/db``, the
    host forgotten), whatever follows a ``:`` and is not a port number; and every ``password=`` value."""
    text = _QUERY_PASSWORD.sub(r"\1***", text)
    scheme = _SCHEME.match(text)
    head, rest = (text[:scheme.end()], text[scheme.end():]) if scheme else ("", text)
    end = rest.rfind("@")
    if end < 0:
        return head + _NOT_A_PORT.sub(":***", rest)
    user, colon, _ = rest[:end].partition(":")
    return f"{head}{user if colon else ''}{colon}***{rest[end:]}"


def display_url(url: URL | str) -> str:
    """The URL with any password hidden (in the user part and in ``password=`` query values), for messages."""
    parsed = url if isinstance(url, URL) else make_url(url)
    return _QUERY_PASSWORD.sub(r"\1***", parsed.render_as_string(hide_password=True))


def _prepare_sqlite_file(url: URL, create_parent: bool) -> None:
    """Make sure an SQLite file's folder exists (created only for the default database)."""
    if not url.database or url.database == ":memory:":
        return
    folder = Path(url.database).expanduser().resolve().parent
    if folder.is_dir():
        return
    if create_parent:
        folder.mkdir(parents=True, exist_ok=True)
        return
    raise DatabaseError(
        f"cannot open SQLite database {url.database!r}: folder {str(folder)!r} does not exist "
        "(create it, or give another path with --db)"
    )


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # noqa: ANN001 - DB-API objects
        cursor = dbapi_connection.cursor()
        # The busy timeout makes concurrent writers wait instead of failing with "database is
        # locked" (the driver's ``timeout`` already set it; stated here for every connection).
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        # WAL lets readers (dashboard, `profiles`) run while a worker writes.
        _switch_to_wal(cursor, engine.url.database)
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


def _switch_to_wal(cursor: sqlite3.Cursor, path: str | None) -> None:
    """``PRAGMA journal_mode=WAL``, retried on SQLITE_BUSY until the busy timeout.

    The busy timeout does not cover this statement. On a file not yet in WAL mode (new, or being
    created by another process) the switch is sqlite3BtreeSetVersion: a read transaction that then
    upgrades itself to an exclusive one to write the file-format bytes. SQLite never calls the busy
    handler for an upgrade from a read lock (two readers upgrading at once would wait for each other
    for ever), so a connection whose upgrade meets another's lock gets SQLITE_BUSY at once. Retried
    from scratch it holds no read lock, so waiting is safe; once the file is in WAL mode the
    statement only reads the header and never conflicts."""
    for _ in backoff(SQLITE_BUSY_TIMEOUT_MS / 1000):
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", sqlite3.SQLITE_BUSY) & 0xFF != sqlite3.SQLITE_BUSY:
                raise
    holders = file_lock_holders(Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm")) if path else []
    raise sqlite3.OperationalError(f"database is locked after {SQLITE_BUSY_TIMEOUT_MS / 1000:g} s: "
                                   f"{describe_holders(holders)}")


def engine_options(url: URL) -> dict[str, Any]:
    """``create_engine`` arguments for ``url``, the same for our engine and Optuna's storage.

    SQLite: writers wait for each other (busy timeout) instead of failing with "database is
    locked". PostgreSQL: a pooled connection is checked before each use (``pool_pre_ping``), so the
    connections a server restart killed are replaced, not handed to the next query."""
    if url.get_backend_name() == "sqlite":
        return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}}
    return {"pool_pre_ping": True, "connect_args": {"connect_timeout": 10}}


def keep_reconnecting(engine: Engine, window_s: float = RECONNECT_WINDOW_S) -> None:
    """From now on, retry a failed new connection to ``engine``'s server with backoff for up to
    ``window_s`` seconds before giving up: a restarting server refuses connections for a while.

    Call it once the server was reached, so that a URL that never worked still fails at once.
    SQLite files are not servers: nothing to do."""
    if engine.dialect.name == "sqlite":
        return

    @event.listens_for(engine, "do_connect")
    def _connect(dialect, _record, cargs, cparams):  # noqa: ANN001, ANN202 - SQLAlchemy's hook
        deadline = time.monotonic() + window_s
        delay = 0.1
        while True:
            try:
                return dialect.connect(*cargs, **cparams)
            except dialect.loaded_dbapi.OperationalError:
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(2 * delay, 2.0)


def create_db_engine(url: str, *, create_parent: bool = False) -> Engine:
    """An SQLAlchemy engine for ``url``, checked by connecting once; from then on it reconnects
    within :data:`RECONNECT_WINDOW_S` (:func:`keep_reconnecting`)."""
    parsed = parse_database_url(url)
    kwargs: dict = {"future": True, **engine_options(parsed)}
    if parsed.get_backend_name() == "sqlite":
        _prepare_sqlite_file(parsed, create_parent)
    try:
        engine = create_engine(parsed, **kwargs)
    except NoSuchModuleError:
        raise DatabaseError(
            f"unsupported database URL {display_url(parsed)!r}: use sqlite:/// or postgresql://"
        ) from None
    except ModuleNotFoundError as exc:
        raise DatabaseError(
            f"the driver for {parsed.get_backend_name()} is not installed ({exc.name}); "
            "install it with: pip install 'autotune[postgres]'"
        ) from None
    except (ArgumentError, TypeError, ValueError) as exc:
        raise DatabaseError(f"invalid database URL {display_url(parsed)!r}: {exc}") from None
    if parsed.get_backend_name() == "sqlite":
        _configure_sqlite(engine)
    try:
        with engine.connect():
            pass
    except DBAPIError as exc:  # OperationalError; ProgrammingError for an unknown ?option= in the URL
        engine.dispose()
        detail = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise DatabaseError(f"cannot connect to database {display_url(parsed)!r}: {detail}") from None
    keep_reconnecting(engine)
    return engine


@dataclass
class Database:
    """An open database: its engine and a session factory."""

    url: str = field(repr=False)  # as given, password included: for connecting, never for showing
    engine: Engine
    # Kept open by a server (autotune.store.shared): closing it at the end of one call is a no-op.
    shared: bool = False

    def __post_init__(self) -> None:
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def display_url(self) -> str:
        return display_url(self.engine.url)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session committed at the end of the block, rolled back on error."""
        session = self._sessions()
        try:
            yield session
            session.commit()
        except SQLAlchemyError as exc:
            session.rollback()
            raise database_error(self.display_url, exc) from exc
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def close(self) -> None:
        if not self.shared:
            self.engine.dispose()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` is the database connection going away (server restarted, connection
    killed), not an error in what was asked."""
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


def lost_connection_behind(exc: BaseException) -> DBAPIError | None:
    """The lost-connection error (:func:`connection_lost`) ``exc`` is or follows from, through its
    causes and the errors it was raised while handling; None when there is none. A caller that
    retries on the same session after the connection died (Optuna's ``_get_trials`` falls back to
    a second query) raises a PendingRollbackError, whose context holds the real cause."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if connection_lost(exc):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def database_error(url: str, exc: SQLAlchemyError) -> DatabaseError:
    """The one-line DatabaseError for ``exc`` on the database at ``url`` (shown without password);
    a lost connection (:func:`lost_connection_behind`) says that what was stored is kept and how to go on."""
    lost = lost_connection_behind(exc)
    if lost is not None:
        return DatabaseError(f"lost the connection to database {url} ({_first_line(lost)}); everything stored "
                             "before is kept: rerun the same command to continue")
    return DatabaseError(f"database error on {url}: {_first_line(exc)}")


def _first_line(exc: SQLAlchemyError) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
