"""One of the processes of the concurrency stress test (test_concurrent_writers.py).

Usage: python stress_process.py ROLE INDEX PROFILE_JSON. Builds what its role needs once, then per
round: reads a database URL on stdin, prints ``ready``, waits for ``go`` (so that every process
starts at the same moment), does its role on that database and prints one line, ``ok ...`` or
``error <message>``; ``quit`` ends it. Roles:

- ``open``: open the database as every command does (creating the schema on a fresh one);
- ``upgrade``: migrate it as `autotune db upgrade` does;
- ``import``: `autotune profiles import PROFILE_JSON` (every import process imports the same file:
  one stores it, the others must be told it is there, ``ok exists``);
- ``tune``: what a tune writes up to its first trial, without running the engine: Optuna's storage
  (under its schema lock), the study with its hardware, probe and models (``open_study``), and the
  first trial's row; each process tunes a study of its own on the same hardware and models.
"""

from __future__ import annotations

import dataclasses
import sys


def main() -> None:
    role, index, profile_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    act = ROLES[role](index, profile_path)
    for round_number, line in enumerate(iter(sys.stdin.readline, "")):
        if line.strip() == "quit":
            return
        url = line.strip()
        print("ready", flush=True)
        sys.stdin.readline()  # "go"
        try:
            outcome = act(url, round_number)
        except Exception as exc:  # noqa: BLE001 - every failure is reported, as one line, to the test
            lines = str(exc).strip().splitlines()
            outcome = f"error {type(exc).__name__}: {lines[0] if lines else ''}"
        print(outcome.replace("\n", " "), flush=True)


def opener(_index: int, _profile: str):  # noqa: ANN202 - returns the role's action
    from autotune.store import open_database

    def act(url: str, _round: int) -> str:
        with open_database(url):
            return "ok"

    return act


def upgrader(_index: int, _profile: str):  # noqa: ANN202
    from autotune.store import migrate, open_database

    def act(url: str, _round: int) -> str:
        with open_database(url, migrate=False) as database:
            return f"ok {migrate.upgrade(database.engine).current}"

    return act


def importer(_index: int, profile: str):  # noqa: ANN202
    from autotune.errors import ConfigurationError
    from autotune.profiles.transfer import import_profile

    def act(url: str, _round: int) -> str:
        try:
            import_profile(url, profile)
        except ConfigurationError as exc:
            if "already exists" in str(exc):
                return "ok exists"
            raise
        return "ok imported"

    return act


def tuner(index: int, _profile: str):  # noqa: ANN202
    from autotune.hardware.profile import HardwareProfile
    from autotune.search.options import TuneOptions
    from autotune.search.setup import set_up_study
    from autotune.search.samplers import SAMPLERS
    from autotune.search.study import open_study, optuna_storage
    from autotune.search.tuner import OPTUNA_SCHEMA_LOCK
    from autotune.store import open_database, results
    from autotune.store.locks import named_lock

    hardware = HardwareProfile("c" * 16, "stress-cpu", "cpu", 1, {"ram_total_bytes": 1 << 34}, ())
    options = TuneOptions(hardware=hardware, concurrencies=(1, 2), max_depth=2, sampler="random", seed=index)
    setup = set_up_study(options)

    def act(url: str, round_number: int) -> str:
        study_setup = dataclasses.replace(setup, name=f"tune-{index}-{round_number}")
        options_here = dataclasses.replace(options, db_url=url, study_name=study_setup.name)
        with open_database(url) as database:
            with named_lock(database.engine, OPTUNA_SCHEMA_LOCK):
                storage = optuna_storage(database, options_here)
            try:
                study_id, study = open_study(database, storage, study_setup, SAMPLERS["random"].optuna_sampler(index))
                trial = study.ask()
                with database.session() as session:
                    results.record_trial(session, study_id, results.TrialEntry(
                        trial_number=trial.number, method="none", depth=0,
                                         concurrency=1, state="failed", reason="not measured (stress test)"))
            finally:
                storage.remove_session()
                storage.engine.dispose()
        return "ok"

    return act


ROLES = {"open": opener, "upgrade": upgrader, "import": importer, "tune": tuner}

if __name__ == "__main__":
    main()
