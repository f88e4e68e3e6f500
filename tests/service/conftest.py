"""The service tests' fixtures: one filled SQLite database and one live server on it for the
session (no test writes)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from service_support import fill, live_server


@pytest.fixture(scope="session")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, int]]:
    """A filled SQLite database: its URL and the profile ids by study name."""
    url = f"sqlite:///{tmp_path_factory.mktemp('service') / 'autotune.db'}"
    return url, fill(url)


@pytest.fixture(scope="session")
def client(stored: tuple[str, dict[str, int]]) -> Iterator[httpx.Client]:
    with live_server(stored[0]) as http:
        yield http


@pytest.fixture(scope="session")
def ids(stored: tuple[str, dict[str, int]]) -> dict[str, int]:
    return stored[1]
