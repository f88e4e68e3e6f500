"""Get-or-create that holds when processes race: the database decides who inserts.

A select-then-insert lets two writers both see no row and both insert; the loser fails on the
unique constraint. Here the insert itself is ``INSERT … ON CONFLICT (key) DO NOTHING`` (SQLite ≥
3.24 and PostgreSQL alike): the loser inserts nothing and reads the winner's row. On PostgreSQL an
insert that meets another transaction's uncommitted row with the same key waits for it, then does
nothing if it committed; the select that follows is a new statement and so sees that row (READ
COMMITTED). SQLite writers take turns (one write lock per file), so the loser sees the winner's
committed row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from autotune.store.tables import Base

Record = TypeVar("Record", bound=Base)

_INSERTS = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}


def get_or_create(
    session: Session, model: type[Record], key: Mapping[str, Any], values: Mapping[str, Any] | None = None
) -> Record:
    """The ``model`` row whose unique ``key`` columns have these values, inserted with ``values``
    as well when there is none. ``key`` must be the columns of one unique constraint of the table;
    ``values`` are used only for a new row."""
    session.flush()  # pending objects first: the insert below bypasses the unit of work
    insert = _INSERTS[session.get_bind().dialect.name]
    session.execute(insert(model.__table__).values(**key, **(values or {})).on_conflict_do_nothing(
        index_elements=list(key)
    ))
    return session.scalars(select(model).filter_by(**key)).one()
