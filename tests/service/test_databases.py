"""The server keeps its database open between requests (autotune.service.databases), still checks
the schema on each one, and closes it when it stops."""

from __future__ import annotations

import pytest

from autotune import api
from autotune.store import shared
from service_support import error_of, live_server


def test_requests_reuse_one_engine_and_shutdown_closes_it(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    engines = []

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - create_db_engine's own
        engines.append(create(*args, **kwargs))
        return engines[-1]

    create = shared.create_db_engine
    monkeypatch.setattr(shared, "create_db_engine", counted)
    with live_server(db_url) as client:
        for path in ("/healthz", "/v1/studies", "/v1/profiles", "/v1/hardware"):
            assert client.get(path).status_code == 200, path
    assert len(engines) == 1
    assert engines[0].pool.checkedin() == 0  # disposed at shutdown


def test_a_database_migrated_under_the_server_is_refused(db_url: str) -> None:
    with live_server(db_url) as client:
        assert client.get("/v1/studies").status_code == 200
        api.db_downgrade(db_url, "0005_performance_model")  # another process, an older autotune's downgrade
        error_of(client.get("/v1/studies"), 503)
        api.db_upgrade(db_url)
        assert client.get("/v1/studies").status_code == 200
