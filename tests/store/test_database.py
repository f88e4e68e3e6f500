"""Opening databases: URL resolution, SQLite set-up, and one clear error for each bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from autotune.errors import DatabaseError
from autotune.store import database, open_database


def test_default_url_is_sqlite_in_user_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert database.resolve_database_url(None) == f"sqlite:///{tmp_path / 'data' / 'autotune' / 'autotune.db'}"
    with open_database() as db:  # zero configuration: folder and file created, schema migrated
        assert db.url.endswith("autotune/autotune.db")
    assert (tmp_path / "data" / "autotune" / "autotune.db").is_file()


def test_url_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(database.ENV_DB_URL, "sqlite:///from-env.db")
    assert database.resolve_database_url(None) == "sqlite:///from-env.db"
    assert database.resolve_database_url("sqlite:///given.db") == "sqlite:///given.db"


def test_sqlite_is_set_up_for_several_processes(sqlite_url: str) -> None:
    with open_database(sqlite_url) as db, db.engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA busy_timeout")).scalar() == database.SQLITE_BUSY_TIMEOUT_MS
        assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1


def test_bare_postgresql_url_uses_psycopg3() -> None:
    assert database.parse_database_url("postgresql://u@h/db").drivername == "postgresql+psycopg"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "malformed database URL"),
        ("bogus://x", "unsupported database URL"),
        ("mysql://u@host/db", "unsupported database URL 'mysql://u@host/db': use sqlite:/// or postgresql://"),
        ("postgresql://u@host:abc/db", "malformed database URL .*the port must be a number"),
        ("postgresql://nobody@127.0.0.1:1/none", "cannot connect to database"),
    ],
)
def test_bad_urls_fail_in_one_line(url: str, message: str) -> None:
    with pytest.raises(DatabaseError, match=message) as info:
        open_database(url)
    assert "\n" not in str(info.value)


def test_sqlite_in_missing_folder_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match="does not exist"):
        open_database(f"sqlite:///{tmp_path / 'missing' / 'a.db'}")
    assert not (tmp_path / "missing").exists()


def test_password_is_hidden_in_messages() -> None:
    with pytest.raises(DatabaseError) as info:
        open_database("postgresql://user:s3cret@127.0.0.1:1/db")
    assert "s3cret" not in str(info.value)


def test_failed_session_rolls_back(sqlite_url: str) -> None:
    from autotune.store.tables import ModelRecord

    with open_database(sqlite_url) as db:
        with pytest.raises(DatabaseError):
            with db.session() as session:
                session.add(ModelRecord(fingerprint="a", name="m", role="target", source="x"))
                session.flush()
                session.add(ModelRecord(fingerprint="a", name="dup", role="target", source="x"))
        with db.session() as session:
            assert session.query(ModelRecord).count() == 0


@pytest.mark.parametrize("url", [
    "postgresql//u:s3cret@host/db", "postgresql://u:s3cret@host:abc/db", "mysql://u:s3cret@host/db", "::u:s3cret@::",
])
def test_a_bad_url_never_shows_its_password(url: str) -> None:
    with pytest.raises(DatabaseError) as info:
        open_database(url)
    assert "s3cret" not in str(info.value) and "***" in str(info.value)
