"""Shared fixtures: isolated data directories and real databases (SQLite files, local PostgreSQL).

PostgreSQL tests run when ``AUTOTUNE_TEST_POSTGRES_URL`` names a server (CI and README's test
command set it); they then FAIL, not skip, if the server cannot be reached. Each test gets a
database of its own, created and dropped around it (``postgres_url``), or one per module
(``postgres_module_url``) for modules that build their content once.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from autotune.hardware.profile import HardwareProfile

POSTGRES_ENV = "AUTOTUNE_TEST_POSTGRES_URL"
FAKE_TRTLLM_DIR = Path(__file__).parent / "engines" / "trtllm" / "fake_trtllm"


@pytest.fixture(autouse=True)
def isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never touch the developer's real database: the default one lives in a temporary folder."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
    monkeypatch.delenv("AUTOTUNE_DB_URL", raising=False)
    monkeypatch.delenv("AUTOTUNE_DEBUG", raising=False)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SQLite file migrated to head once per session; tests get copies (a copy takes a
    millisecond, a migration a few hundred)."""
    from autotune.store import open_database

    path = tmp_path_factory.mktemp("template") / "template.db"
    with open_database(f"sqlite:///{path}"):
        pass  # closing the last connection checkpoints the WAL into the file: a copy of it is whole
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path, sqlite_template: Path) -> str:
    """An SQLite database at head (a copy of the session's template), as a fresh `autotune` run leaves it."""
    path = tmp_path / "autotune.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def empty_sqlite_url(tmp_path: Path) -> str:
    """An SQLite file that does not exist yet: for tests of creating and migrating a schema."""
    return f"sqlite:///{tmp_path / 'new.db'}"


def _postgres_admin_url() -> str:
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        pytest.skip(f"PostgreSQL tests need {POSTGRES_ENV} (CI sets it)")
    return server


@contextmanager
def _fresh_postgres_database(template: str | None = None) -> Iterator[str]:
    """Create a database on the configured server (empty, or a copy of ``template``), yield its
    URL, drop it afterwards."""
    admin_url = make_url(_postgres_admin_url()).set(drivername="postgresql+psycopg")
    name = f"autotune_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))
    except Exception as exc:  # a configured server must be reachable: fail, never skip
        admin.dispose()
        pytest.fail(f"{POSTGRES_ENV}={os.environ[POSTGRES_ENV]} is set but unusable: {exc}")
    try:
        yield admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """The name of a PostgreSQL database migrated to head once per session, which tests' databases
    are created from (CREATE DATABASE ... TEMPLATE copies it in tens of milliseconds)."""
    from autotune.store import open_database

    with _fresh_postgres_database() as url:
        with open_database(url):
            pass  # the engine is disposed on closing: a template must have no connections
        yield make_url(url).database


@pytest.fixture
def postgres_url(postgres_template: str) -> Iterator[str]:
    """A fresh PostgreSQL database at head for one test."""
    with _fresh_postgres_database(postgres_template) as url:
        yield url


@pytest.fixture
def empty_postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database: for tests of creating and migrating a schema."""
    with _fresh_postgres_database() as url:
        yield url


@pytest.fixture(scope="module")
def postgres_module_url(postgres_template: str) -> Iterator[str]:
    """A fresh PostgreSQL database at head shared by the tests of one module (which fill it once and
    must leave it as they found it); no other module sees it."""
    with _fresh_postgres_database(postgres_template) as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """Every storage test runs on both backends: a database at head."""
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_db_url(request: pytest.FixtureRequest) -> str:
    """An empty database on each backend: for tests of creating and migrating the schema."""
    return request.getfixturevalue(f"empty_{request.param}_url")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def new_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """A maker of fresh, empty databases of one backend (SQLite files, or databases on the
    configured PostgreSQL server, dropped afterwards), for tests that need many."""
    with ExitStack() as stack:
        count = iter(range(1_000_000))

        def make() -> str:
            if request.param == "sqlite":
                return f"sqlite:///{tmp_path / f'fresh-{next(count)}.db'}"
            return stack.enter_context(_fresh_postgres_database())

        yield make


@pytest.fixture
def fake_trtllm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[], list[dict]]:
    """Make the fake TensorRT-LLM importable (worker processes inherit sys.path); returns a reader
    of its event log. The test process itself must never import it."""
    monkeypatch.syspath_prepend(str(FAKE_TRTLLM_DIR))
    log = tmp_path / "fake-trtllm.jsonl"
    monkeypatch.setenv("FAKE_TRTLLM_LOG", str(log))
    monkeypatch.delenv("FAKE_TRTLLM_FAULT", raising=False)

    def events() -> list[dict]:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    yield events
    assert "tensorrt_llm" not in sys.modules, "the test process imported tensorrt_llm; only workers may"


@pytest.fixture
def gpu() -> Callable[[int], HardwareProfile]:
    """A hardware profile of one GPU with ``memory_bytes`` of memory."""

    def make(memory_bytes: int) -> HardwareProfile:
        device = {"index": 0, "name": "Test GPU", "memory_total_bytes": memory_bytes}
        return HardwareProfile("f" * 16, "test-gpu", "cuda", 1, {"devices": [device], "benchmarked_device": 0}, ())

    return make


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The python of the venv with vLLM (see tests/vllm_support.py): skip without one, fail when broken."""
    from vllm_support import vllm_python as find

    return find()


@pytest.fixture(scope="session")
def hf_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The built-in target and draft exported as Hugging Face folders ("target", "draft"), once per session."""
    from autotune.engines.embedded.hf_export import export_builtin

    target, draft = export_builtin(tmp_path_factory.mktemp("hf-models"), "both")
    return {"target": target, "draft": draft}
