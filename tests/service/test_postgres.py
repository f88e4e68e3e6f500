"""The service on PostgreSQL: the same answers as the CLI, and a password in the URL never shown."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy.engine import make_url

import profile_factory as factory
from autotune.cli import cli
from autotune.store import open_database
from service_support import error_of, live_server

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def pg_client(postgres_module_url: str) -> Iterator[tuple[str, int, httpx.Client]]:
    """One small study (two methods, two concurrency levels: the SQLite tests cover the rest) and a server."""
    with open_database(postgres_module_url) as database, database.session() as session:
        profile = factory.study(session, "pg", factory.hardware(session, *factory.H100),
                                factory.model(session, "tiny-target", "tttt000011112222"), methods=("none", "mtp"),
                                concurrencies=(1, 2), confirm=True)
        profile_id = profile.id
    with live_server(postgres_module_url) as client:
        yield postgres_module_url, profile_id, client


def test_reads_match_the_cli_on_postgres(pg_client: tuple[str, int, httpx.Client]) -> None:
    url, profile_id, client = pg_client
    for path, args in [("/v1/profiles", ("profiles", "list")),
                       (f"/v1/profiles/{profile_id}", ("profiles", "show", str(profile_id))),
                       ("/v1/profiles/best?model=tiny-target&concurrency=2", ("profiles", "best", "--model",
                        "tiny-target", "--hardware", factory.H100[1], "--concurrency", "2"))]:
        cli_result = CliRunner().invoke(cli, [*args, "--json", "--db", url], catch_exceptions=False)
        answer = client.get(path).json()
        expected = json.loads(cli_result.output)
        if path.startswith("/v1/profiles/best"):  # the CLI defaults to this machine, the API to any
            answer["request"]["hardware"] = expected["request"]["hardware"]
        assert answer == expected, path
    assert client.get("/healthz").json()["status"] == "ok"


def test_a_wrong_password_is_503_and_never_shown(postgres_module_url: str) -> None:
    wrong = make_url(postgres_module_url).set(password="n0t-the-pa55word", username="nobody-here")
    with live_server(wrong.render_as_string(hide_password=False)) as client:
        for path in ("/healthz", "/v1/profiles"):
            answer = client.get(path)
            error_of(answer, 503)
            assert "n0t-the-pa55word" not in answer.text and "nobody-here" not in answer.text
