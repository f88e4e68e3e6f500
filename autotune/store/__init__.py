"""The profile database: the SQL tables (:mod:`.models`), the connection (:mod:`.database`), Alembic
migrations from code (:mod:`.migrate`), and the writes and queries, one module per concern:
:mod:`.repository` (hardware, models, profiles), :mod:`.results` (studies and their trials),
:mod:`.performance` (acceptance and cost profiles), :mod:`.profile_queries` (``autotune profiles``),
:mod:`.plan_queries` (``autotune plan``), :mod:`.validations` (``autotune validate`` runs);
:mod:`.locks`, :mod:`.rows`, :mod:`.shared` and :mod:`.redact` keep concurrent writers and a
long-running server safe.

This package imports no torch, optuna or engine code.
"""

from autotune.store.database import Database, default_database_url, resolve_database_url
from autotune.store.migrate import SchemaStatus

__all__ = ["Database", "SchemaStatus", "default_database_url", "open_database", "resolve_database_url"]


def open_database(url: str | None = None, *, migrate: bool = True) -> Database:
    """Open the database at ``url`` (see :func:`resolve_database_url`).

    With ``migrate`` a database without our tables is created at the newest revision (zero
    configuration); one at an older or unknown revision is refused with a DatabaseError before
    anything is written. Without ``migrate`` (the ``db`` commands) the schema is left alone.

    Inside :meth:`autotune.store.shared.SharedDatabases.active` (a server's request) the engine is
    the one kept open for the URL, and closing the Database leaves it open.
    """
    from autotune.store import database, migrate as migrations, shared

    resolved = resolve_database_url(url)
    kept = shared.active()
    if kept is not None:
        opened = kept.get(resolved, create_parent=resolved == default_database_url())
        if migrate:
            migrations.ensure_schema(opened.engine)
        return opened
    engine = database.create_db_engine(resolved, create_parent=resolved == default_database_url())
    try:
        if migrate:
            migrations.ensure_schema(engine)
    except BaseException:
        engine.dispose()
        raise
    return Database(resolved, engine)
