"""The database server going away under a study. A restart is simulated by killing every other
connection to the database (``pg_terminate_backend``), which is what the tuner sees of one.

Between queries it is invisible: pooled connections are checked before use and replaced, new ones
retried for a bounded time, advisory locks left cleanly. A query cut off mid-way ends the run with
one line that says to rerun. Either way no finished trial is lost and a rerun completes the study.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace

import optuna
import psycopg
import pytest
from optuna.storages._rdb.storage import _create_scoped_session
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from autotune.errors import DatabaseError
from autotune.search import TuneOptions, list_studies, study_trials, tune
from autotune.search.budget import FINISHED, counted_trials
from autotune.search.study import optuna_storage, storage_errors
from autotune.store import open_database, repository
from autotune.store.database import create_db_engine, keep_reconnecting
from autotune.store.locks import named_lock
from autotune.store.tables import HardwareRecord

from test_resume import read_until, screening, start_worker

pytestmark = pytest.mark.postgres

LOST = r"^lost the connection to database .*: rerun the same command to continue$"


def psycopg_url(url: str) -> str:
    return make_url(url).set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def terminate_backends(url: str) -> int:
    """Kill every other connection to ``url``'s database, as a server restart does; how many."""
    engine = create_engine(psycopg_url(url))
    try:
        with engine.connect() as connection:
            return len(connection.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )).all())
    finally:
        engine.dispose()


def add_hardware(database, name: str) -> None:  # noqa: ANN001 - a Database
    with database.session() as session:
        repository.upsert_hardware(session, fingerprint=name, name=name, device_type="cpu", device_count=1,
                                   memory_total_bytes=1 << 30, spec={})


@pytest.mark.filterwarnings("ignore:Heartbeat of storage:UserWarning")  # ask/tell without Study.optimize, as the tuner
def test_connections_killed_between_queries_are_replaced(postgres_url: str) -> None:
    with open_database(postgres_url) as database:
        storage = optuna_storage(database, TuneOptions())
        try:
            study = optuna.create_study(storage=storage, study_name="s")
            study.tell(study.ask(), 1.0)
            add_hardware(database, "before")
            assert terminate_backends(postgres_url) >= 2  # ours and Optuna's pooled connections
            study.tell(study.ask(), 2.0)
            add_hardware(database, "after")
        finally:
            storage.remove_session()
            storage.engine.dispose()
        with database.session() as session:
            assert session.scalar(select(func.count()).select_from(HardwareRecord)) == 2
    assert [t.value for t in optuna.load_study(study_name="s", storage=psycopg_url(postgres_url)).trials] == [1.0, 2.0]


def test_a_query_cut_off_is_one_line_that_says_rerun(postgres_url: str) -> None:
    kill_myself = text("SELECT pg_terminate_backend(pg_backend_pid())")
    with open_database(postgres_url) as database:
        add_hardware(database, "kept")
        with pytest.raises(DatabaseError, match=LOST):
            with database.session() as session:
                session.execute(kill_myself)
        storage = optuna_storage(database, TuneOptions())
        try:
            # Optuna wraps every storage call's session so, and blames "invalid data" for the error.
            with pytest.raises(DatabaseError, match=LOST):
                with storage_errors(database), _create_scoped_session(storage.scoped_session) as session:
                    session.execute(kill_myself)
            # Optuna's _get_trials answers a failed query with a second one on the same session: that
            # raises a PendingRollbackError, whose context is the lost connection (seen in a full run).
            with pytest.raises(DatabaseError, match=LOST):
                with storage_errors(database), _create_scoped_session(storage.scoped_session) as session:
                    try:
                        session.execute(kill_myself)
                    except OperationalError:
                        session.execute(text("SELECT 1"))
        finally:
            storage.remove_session()
            storage.engine.dispose()
        with database.session() as session:  # the next session reconnects; nothing stored was lost
            assert session.scalars(select(HardwareRecord.name)).all() == ["kept"]


def test_a_lock_whose_connection_is_killed_is_left_without_error(postgres_url: str) -> None:
    with open_database(postgres_url) as database:
        with named_lock(database.engine, "study"):
            assert terminate_backends(postgres_url) >= 1
        with database.engine.connect() as connection:  # the server released it with the session
            assert connection.scalar(text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")) == 0
        with named_lock(database.engine, "study"):
            pass


def test_new_connections_are_retried_for_a_bounded_time(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = create_engine(psycopg_url(postgres_url))
    keep_reconnecting(engine, window_s=1.0)
    connect = engine.dialect.connect
    calls: list[float] = []

    def refused_twice(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - the dialect's signature
        calls.append(time.monotonic())
        if len(calls) <= 2:
            raise psycopg.OperationalError("connection refused: the server is restarting")
        return connect(*args, **kwargs)

    def refused(*_args, **_kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(time.monotonic())
        raise psycopg.OperationalError("connection refused: the server is down")

    try:
        monkeypatch.setattr(engine.dialect, "connect", refused_twice)
        with engine.connect() as connection:
            assert connection.scalar(text("SELECT 1")) == 1
        assert len(calls) == 3
        engine.dispose()
        calls.clear()
        monkeypatch.setattr(engine.dialect, "connect", refused)
        with pytest.raises(OperationalError, match="the server is down"):
            engine.connect()
        assert 2 < len(calls) and calls[-1] - calls[0] <= 1.0  # backed off, and gave up within the window
    finally:
        engine.dispose()
    started = time.monotonic()  # a server never reached is not waited for
    with pytest.raises(DatabaseError, match="cannot connect"):
        create_db_engine("postgresql://postgres@127.0.0.1:9/nothing")
    assert time.monotonic() - started < 5


def read_until_or_end(process, prefix: str) -> list[str]:  # noqa: ANN001 - a Popen
    """The worker's lines up to the first starting with ``prefix``, or all of them if it ends first."""
    lines = []
    for line in process.stdout:
        lines.append(line.rstrip())
        if line.startswith(prefix):
            break
    return lines


@pytest.mark.parametrize("kills", ["twice", "storm"])
def test_postgres_restarted_mid_study_loses_no_trial(options, postgres_url, tmp_path, kills) -> None:
    """``twice``: every connection killed while trials 2 and 4 run; ``storm``: killed again and
    again for three seconds, so that some query is cut off mid-way. The run either completes or
    stops with the one-line message; a rerun of the same options completes the study."""
    options = replace(options, db_url=postgres_url, n_trials=6, confirm=False)
    worker = start_worker(options, tmp_path)
    try:
        lines = read_until(worker, "start 1 ")
        if kills == "twice":
            terminate_backends(postgres_url)
            # A query in flight at that moment (a heartbeat, a tell) is cut off and ends the run with
            # the one-line message, which the checks below accept: kill again only if it went on.
            lines += read_until_or_end(worker, "start 3 ")
            if worker.poll() is None:
                terminate_backends(postgres_url)
        else:
            end = time.monotonic() + 3
            while time.monotonic() < end:
                terminate_backends(postgres_url)
                time.sleep(0.02)
        lines += worker.communicate(timeout=120)[0].splitlines()
    finally:
        worker.kill()
        worker.stdout.close()
    # Where a traceback was printed, show it whole (pytest would cut the list of lines short).
    traceback = next((i for i, line in enumerate(lines) if "Traceback" in line), None)
    assert traceback is None, "\n".join(lines[max(0, traceback - 2):])
    finished = [line for line in lines if line.startswith("done ")]
    stored = screening(study_trials(postgres_url, "tiny"))
    assert len(stored) >= len(finished)  # every trial this run finished has its row
    if worker.returncode != 0:
        assert worker.returncode == 2 and lines[-1].startswith("error: "), lines
        assert re.match(LOST, lines[-1].removeprefix("error: ")), lines[-1]
        time.sleep(options.grace_period_s + 1)  # a trial left running is now stale: the rerun retries it
        assert tune(options).status == "complete"
        after = {row.trial_number: row for row in screening(study_trials(postgres_url, "tiny"))}
        assert all(after[row.trial_number] == row for row in stored)  # nothing finished was lost or changed

    trials = optuna.load_study(study_name="tiny", storage=psycopg_url(postgres_url)).trials
    measured = counted_trials(trials)
    assert all(trial.state in FINISHED for trial in trials) and len(measured) == options.n_trials
    rows = {row.trial_number for row in screening(study_trials(postgres_url, "tiny"))}
    assert {trial.number for trial in measured} <= rows  # every counted trial has exactly its row
    studies = list_studies(postgres_url)
    assert len(studies) == 1 and studies[0].status == "complete"
