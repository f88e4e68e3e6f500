"""Opening the profile database: URL resolution, engine set-up, error translation.

The URL comes from ``--db``, else ``AUTOTUNE_DB_URL``, else an SQLite file in the user's data
directory (zero configuration). SQLite is set up for several processes at once (tuning workers,
a dashboard): write-ahead logging, a generous busy timeout, foreign keys on.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from autotune.errors import DatabaseError

ENV_DB_URL = "AUTOTUNE_DB_URL"
SQLITE_BUSY_TIMEOUT_MS = 30_000


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
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


# A scheme as typed, well-formed or not: "postgresql://", "postgresql:/", "postgresql:", "postgresql//".
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*(?::/{0,2}|/{1,2})")
_QUERY_PASSWORD = re.compile(r"(password=)[^&#\s]*", re.IGNORECASE)


def mask_password(text: str) -> str:
    """``text`` (a URL too malformed to parse, which SQLAlchemy cannot render without its password)
    with its password replaced by ``***``: everything from the first ``:`` after the scheme up to the
    last ``@`` (a typed password may hold ``:``, ``/``, ``@`` or spaces; with no ``:`` there, all of
    it, since it may be the password without a user), and every ``password=`` query value."""
    text = _QUERY_PASSWORD.sub(r"\1***", text)
    end = text.rfind("@")
    if end < 0:
        return text
    scheme = _SCHEME.match(text)
    start = scheme.end() if scheme else 0
    user, colon, _ = text[start:end].partition(":")
    return f"{text[:start]}{user if colon else ''}{colon}***{text[end:]}"


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
        # WAL lets readers (dashboard, `profiles`) run while a worker writes; the busy timeout
        # makes concurrent writers wait instead of failing with "database is locked".
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


def create_db_engine(url: str, *, create_parent: bool = False) -> Engine:
    """An SQLAlchemy engine for ``url``, checked by connecting once."""
    parsed = parse_database_url(url)
    kwargs: dict = {"future": True}
    if parsed.get_backend_name() == "sqlite":
        _prepare_sqlite_file(parsed, create_parent)
        kwargs["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
    else:
        kwargs["pool_pre_ping"] = True
        if parsed.get_backend_name() == "postgresql":
            kwargs["connect_args"] = {"connect_timeout": 10}
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
    except OperationalError as exc:
        engine.dispose()
        detail = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise DatabaseError(f"cannot connect to database {display_url(parsed)!r}: {detail}") from None
    return engine


@dataclass
class Database:
    """An open database: its engine and a session factory."""

    url: str
    engine: Engine

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
            raise DatabaseError(f"database error on {self.display_url}: {_first_line(exc)}") from exc
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _first_line(exc: SQLAlchemyError) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
