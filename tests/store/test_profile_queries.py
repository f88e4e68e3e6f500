"""The SQL behind `autotune profiles`: filters, key lookup, and the best-trial query against brute force."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text

import profile_factory as factory
from autotune.store import open_database, profile_queries
from autotune.store.tables import MeasurementRecord


@pytest.fixture
def populated(db_url: str) -> tuple[str, dict[str, int]]:
    return db_url, factory.populate(db_url)


def brute_force_best(session, study_ids, concurrency=None, max_tpot_ms=None):  # noqa: ANN001, ANN201
    rows = [
        m for m in session.scalars(select(MeasurementRecord).where(MeasurementRecord.study_id.in_(study_ids)))
        if m.state == "complete" and m.tokens_per_s is not None
        and (concurrency is None or m.concurrency == concurrency)
        and (max_tpot_ms is None or (m.tpot_ms_p50 is not None and m.tpot_ms_p50 <= max_tpot_ms))
    ]
    return max(rows, key=lambda m: (m.tokens_per_s, m.id), default=None)


def test_find_profiles_filters_and_orders_newest_first(populated) -> None:  # noqa: ANN001
    url, ids = populated
    with open_database(url) as database, database.session() as session:
        everything = profile_queries.find_profiles(session)
        assert [p.id for p in everything] == [ids["other"], ids["cpu"], ids["h100-new"], ids["h100-old"]]
        h100 = profile_queries.find_hardware(session, factory.H100[0])
        target = profile_queries.find_models(session, "tiny-target")
        on_h100 = profile_queries.find_profiles(session, hardware_ids=[h.id for h in h100], target_ids=[t.id for t in target])
        assert [p.id for p in on_h100] == [ids["h100-new"], ids["h100-old"]]
        assert on_h100[0].study.name == "h100-new" and on_h100[0].hardware.name == factory.H100[0]
        assert [p.id for p in profile_queries.find_profiles(session, method="mtp")] == [
            p.id for p in everything if p.method == "mtp"
        ]
        candidates = profile_queries.profile_candidates(session, hardware_ids=None, target_ids=[t.id for t in target])
        assert [c.id for c in candidates] == [ids["cpu"], ids["h100-new"], ids["h100-old"]]


def test_key_lookup_prefers_fingerprint_then_name_then_unique_prefix(db_url: str) -> None:
    with open_database(db_url) as database, database.session() as session:
        a = factory.model(session, "alpha", "abc0000000000001")
        b = factory.model(session, "abc0000000000001", "ffff000000000002")  # a name equal to a's fingerprint
        factory.model(session, "gamma", "abd0000000000003")
        session.flush()
        assert profile_queries.find_models(session, "abc0000000000001") == [a]  # fingerprint wins over name
        assert profile_queries.find_models(session, "alpha") == [a]
        assert profile_queries.find_models(session, "ffff") == [b]  # unique prefix
        assert profile_queries.find_models(session, "ab") == []  # ambiguous prefix
        assert profile_queries.find_models(session, "a%") == []  # LIKE wildcards are literal
        assert profile_queries.find_models(session, "nothing") == []


@pytest.mark.parametrize("concurrency, max_tpot_ms", [(None, None), (8, None), (4, 9.0), (None, 6.0), (2, 0.001), (3, None)])
def test_best_measurement_matches_brute_force(populated, concurrency, max_tpot_ms, monkeypatch) -> None:  # noqa: ANN001
    url, _ = populated
    monkeypatch.setattr(profile_queries, "STUDIES_PER_QUERY", 2)  # SQLite: several statements, combined
    with open_database(url) as database, database.session() as session:
        study_ids = [s.id for s in (profile_queries.find_study(session, n) for n in ("h100-old", "h100-new", "cpu"))]
        got = profile_queries.best_measurement(session, study_ids, concurrency=concurrency, max_tpot_ms=max_tpot_ms)
        expected = brute_force_best(session, study_ids, concurrency, max_tpot_ms)
        assert got == expected
        if expected is not None:
            assert got.state == "complete"


def test_best_measurement_breaks_ties_by_newest_trial(db_url: str) -> None:
    with open_database(db_url) as database, database.session() as session:
        hw, target = factory.hardware(session), factory.model(session, "t", "t" * 16)
        profile = factory.study(session, "ties", hw, target, methods=("none",), concurrencies=(1,), failed_trials=0)
        twin = MeasurementRecord(study=profile.study, trial_number=99, method="none", depth=0, concurrency=1,
                                 state="complete", tokens_per_s=factory.baseline_tokens_per_s(1), tpot_ms_p50=1.0,
                                 acceptance_by_position=[], extra={})
        session.add(twin)
        session.flush()
        assert profile_queries.best_measurement(session, [profile.study_id], concurrency=1, phase="screening") == twin


def test_best_measurement_reads_one_phase(db_url: str) -> None:
    """Confirmed rows are asked for by default; a faster screening pass does not count there."""
    with open_database(db_url) as database, database.session() as session:
        hw, target = factory.hardware(session), factory.model(session, "t", "t" * 16)
        profile = factory.study(session, "phases", hw, target, methods=("none",), concurrencies=(1,), failed_trials=0)
        assert profile_queries.best_measurement(session, [profile.study_id], concurrency=1) is None  # none confirmed
        confirmed = MeasurementRecord(study=profile.study, trial_number=0, method="none", depth=0, concurrency=1,
                                      state="complete", tokens_per_s=1.0, tpot_ms_p50=1.0, phase="confirmation",
                                      repetitions=3, acceptance_by_position=[], extra={})
        session.add(confirmed)
        session.flush()
        assert profile_queries.best_measurement(session, [profile.study_id], concurrency=1) == confirmed


def test_concurrencies_fastest_tpot_and_counts(populated) -> None:  # noqa: ANN001
    url, _ = populated
    with open_database(url) as database, database.session() as session:
        cpu = profile_queries.find_study(session, "cpu")
        assert profile_queries.measured_concurrencies(session, [cpu.id]) == list(factory.CONCURRENCIES)
        fastest = profile_queries.fastest_tpot(session, [cpu.id], 2)
        times = [m.tpot_ms_p50 for m in cpu.measurements if m.concurrency == 2 and m.state == "complete"]
        assert fastest.concurrency == 2 and fastest.tpot_ms_p50 == min(times)
        target = profile_queries.find_models(session, "tiny-target")
        by_hardware = profile_queries.profile_counts_by_hardware(session, [t.id for t in target])
        assert [(h.name, n) for h, n in by_hardware] == [(factory.H100[0], 2), (factory.CPU[0], 1)]
        by_target = profile_queries.profile_counts_by_target(session, [by_hardware[0][0].id])
        assert [(m.name, n) for m, n in by_target] == [("tiny-target", 2), ("other-target", 1)]


def test_find_study_by_name_or_id(populated) -> None:  # noqa: ANN001
    url, _ = populated
    with open_database(url) as database, database.session() as session:
        study = profile_queries.find_study(session, "cpu")
        assert profile_queries.find_study(session, study.id) == study
        assert profile_queries.find_study(session, str(study.id)) == study
        assert profile_queries.find_study(session, "missing") is None
        assert profile_queries.study_names(session, limit=2) == ["other", "cpu"]


def test_best_trial_query_reads_the_throughput_index(sqlite_url: str) -> None:
    """The per-study question is answered from ix_autotune_measurements_throughput (SQLite's plan)."""
    factory.populate(sqlite_url)
    sql = profile_queries._fastest_fit_union_sql(2, True, True).text
    with open_database(sqlite_url) as database, database.engine.connect() as connection:
        plan = connection.execute(text("EXPLAIN QUERY PLAN " + sql), {
            "study_0": 1, "study_1": 2, "state": "complete", "phase": "confirmation", "concurrency": 8,
            "max_tpot_ms": 5.0,
        }).all()
    details = " ".join(row[-1] for row in plan)
    # Not a covering index since profiles best leaves out K = 0 rows (a depth condition): still this index.
    assert "ix_autotune_measurements_throughput" in details

