"""Many processes on one new database at the same moment: opening it (and creating its schema),
`db upgrade`, profile imports and tunes writing their first trial, released together on a fresh
database each round. None may fail: not on "database is locked" (SQLite's journal-mode switch, the
first migration), not on a unique constraint (get-or-create of hardware and models, studies,
profiles). Runs on SQLite and PostgreSQL (``new_database_url``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, select

from autotune.store import migrate, open_database
from autotune.store.tables import HardwareRecord, MeasurementRecord, ModelRecord, StudyRecord

SCRIPT = Path(__file__).with_name("stress_process.py")
REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "cpu-amd-epyc-2-cores-24-gib__autotune-byte-target__draft-d5-c8.json"
ROLES = ("open", "upgrade", "import", "tune") * 2  # 8 processes
ROUNDS = 10

pytestmark = pytest.mark.slow  # ~15 s a backend: 8 processes x 10 rounds


def test_eight_processes_on_a_fresh_database_ten_rounds(new_database_url, tmp_path: Path) -> None:  # noqa: ANN001
    # stderr (warnings, a traceback) goes to a file: stdout carries the protocol alone.
    logs = [tmp_path / f"stress-{index}-{role}.log" for index, role in enumerate(ROLES)]
    workers = [subprocess.Popen([sys.executable, str(SCRIPT), role, str(index), str(PROFILE)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log.open("w"), text=True, cwd=REPO,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
               for index, (role, log) in enumerate(zip(ROLES, logs))]
    failures: list[str] = []
    try:
        for round_number in range(ROUNDS):
            url = new_database_url()
            for worker in workers:
                worker.stdin.write(url + "\n")
                worker.stdin.flush()
            for worker, log in zip(workers, logs):  # every one has its URL and waits: release them together
                assert worker.stdout.readline().strip() == "ready", f"a stress process died: {log.read_text()[-2000:]}"
            for worker in workers:
                worker.stdin.write("go\n")
                worker.stdin.flush()
            outcomes = [worker.stdout.readline().strip() for worker in workers]
            failures += [f"round {round_number} {role}: {outcome}" for role, outcome in zip(ROLES, outcomes)
                         if not outcome.startswith("ok")]
            imports = Counter(outcome for role, outcome in zip(ROLES, outcomes) if role == "import")
            if not failures:
                assert imports == {"ok imported": 1, "ok exists": 1}, (round_number, imports)
                check_database(url, tunes=ROLES.count("tune"))
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.stdin.write("quit\n")
                worker.stdin.flush()
        for worker in workers:
            worker.communicate(timeout=60)
    assert failures == []


def check_database(url: str, tunes: int) -> None:
    """The schema at head once, one imported study and one per tune, each with its trials."""
    with open_database(url) as database:
        migrate.check(database.engine)
        assert migrate.current_revision(database.engine) == migrate.head_revision()
        with database.session() as session:
            assert session.scalar(select(func.count(StudyRecord.id))) == 1 + tunes
            trials = session.execute(select(StudyRecord.name, func.count(MeasurementRecord.id))
                                     .join(MeasurementRecord).group_by(StudyRecord.name)).all()
            assert all(count >= 1 for _, count in trials) and len(trials) == 1 + tunes
            fingerprints = session.scalars(select(HardwareRecord.fingerprint)).all()
            assert len(fingerprints) == len(set(fingerprints)) == 2  # the imported machine, the tunes' one
            models = session.scalars(select(ModelRecord.fingerprint)).all()
            assert len(models) == len(set(models))
