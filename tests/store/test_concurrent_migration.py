"""Two processes migrating one fresh database at the same moment (workers opening a new shared
database, or two `autotune db upgrade`): both succeed, the schema is created once and is at head,
and what each wrote afterwards is there. Runs on SQLite and on PostgreSQL (``empty_db_url``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from autotune.store import migrate, open_database
from autotune.store.tables import VERSION_TABLE, MeasurementRecord, StudyRecord

SCRIPT = Path(__file__).with_name("migrate_process.py")
REPO = Path(__file__).resolve().parents[2]


def start(url: str, how: str, name: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(SCRIPT), url, how, name], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize("how", ["open", "upgrade"])
def test_two_processes_migrate_a_fresh_database_once(empty_db_url: str, how: str) -> None:
    workers = [start(empty_db_url, how, f"study-{n}") for n in range(2)]
    try:
        for worker in workers:  # both imported and waiting: release them together
            assert worker.stdout.readline().strip() == "ready"
        for worker in workers:
            worker.stdin.write("go\n")
            worker.stdin.flush()
        outputs = [worker.communicate(timeout=60)[0] for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
    head = migrate.head_revision()
    for worker, output in zip(workers, outputs):
        assert (worker.returncode, output.strip()) == (0, f"revision {head}")  # no error, no warning

    with open_database(empty_db_url) as database:
        migrate.check(database.engine)  # every table, index and constraint once, as the models say
        with database.engine.connect() as connection:
            assert connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all() == [head]
        with database.session() as session:
            counts = session.execute(
                select(StudyRecord.name, func.count(MeasurementRecord.id)).join(MeasurementRecord)
                .group_by(StudyRecord.name).order_by(StudyRecord.name)
            ).all()
    assert [tuple(row) for row in counts] == [("study-0", 1), ("study-1", 1)]
