"""Alembic environment: runs against the engine handed over by autotune.store.migrate."""

from alembic import context
from sqlalchemy import create_engine

from autotune.store.tables import TABLE_PREFIX, VERSION_TABLE, Base

config = context.config
target_metadata = Base.metadata


def include_name(name, type_, _parent_names):  # noqa: ANN001 - alembic hook signature
    """Compare only our own tables: Optuna's tables may share the database."""
    if type_ == "table":
        return name.startswith(TABLE_PREFIX) and name != VERSION_TABLE
    return True


def run_migrations_online() -> None:
    engine = config.attributes.get("engine") or create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Batch mode rebuilds a table (copy, drop, rename); with foreign keys on, the drop would
            # fire ON DELETE actions (profiles losing their trial). Off for the migration, checked after.
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            version_table=VERSION_TABLE,
            include_name=include_name,
            # SQLite cannot ALTER most things in place; batch mode rebuilds the table.
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
        if sqlite:
            broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")  # the pooled connection keeps its pragmas
            if broken:
                raise RuntimeError(f"migration left rows with dangling foreign keys: {broken[:5]}")


if context.is_offline_mode():
    raise SystemExit("autotune migrations run online only: use `autotune db upgrade`")
run_migrations_online()
