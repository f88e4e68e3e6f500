"""The SQL behind `autotune plan`: finding the target and the hardware a plan rests on."""

from __future__ import annotations

import pytest

import profile_factory as factory
from autotune.errors import ConfigurationError
from autotune.store import open_database, plan_queries


@pytest.fixture
def populated(sqlite_url: str) -> str:
    factory.populate(sqlite_url)
    return sqlite_url


def test_the_target_is_found_by_name_and_an_unknown_one_lists_the_stored(populated: str) -> None:
    with open_database(populated) as database, database.session() as session:
        assert plan_queries.find_target(session, " tiny-target ", "no-such-workload").fingerprint == "tttt000011112222"
        with pytest.raises(ConfigurationError, match=r"unknown target model 'nobody'; stored targets: tiny-target"):
            plan_queries.find_target(session, "nobody", "no-such-workload")


def test_hardware_is_found_with_its_latest_probe_or_not_at_all(populated: str) -> None:
    with open_database(populated) as database, database.session() as session:
        record, _probe = plan_queries.hardware_with_probe(session, factory.H100[1])
        assert record.name == factory.H100[0]
        assert plan_queries.hardware_with_probe(session, "no-such-machine") is None
        assert f"{factory.H100[0]} ({factory.H100[1]})" in plan_queries.stored_hardware_names(session)


def test_an_empty_database_names_no_hardware(sqlite_url: str) -> None:
    with open_database(sqlite_url) as database, database.session() as session:
        assert plan_queries.stored_hardware_names(session) == "none"
