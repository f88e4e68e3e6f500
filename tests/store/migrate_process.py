"""One process migrating a database, for the concurrent first-migration test.

Usage: python migrate_process.py URL open|upgrade NAME. Prints ``ready`` once imported, waits for
a line on stdin (so that two processes migrate at the same moment), then migrates: ``open`` the
way every command does (open_database), ``upgrade`` the way `autotune db upgrade` does. Then it
writes a study named NAME with one trial and prints ``revision <current revision>``.
"""

from __future__ import annotations

import sys

from autotune.store import migrate, open_database, repository, results


def main() -> None:
    url, how, name = sys.argv[1:4]
    print("ready", flush=True)
    sys.stdin.readline()
    if how == "open":
        database = open_database(url)
    else:
        database = open_database(url, migrate=False)
        migrate.upgrade(database.engine)
    with database, database.session() as session:
        hardware = repository.upsert_hardware(session, fingerprint=name, name=name, device_type="cpu", device_count=1,
                                              memory_total_bytes=1 << 30, spec={})
        target = results.upsert_model(session, results.ModelEntry(
            fingerprint=name, name=name, role="target", source=f"builtin:{name}",
                                      num_params=10, num_mtp_modules=0, vocab_size=259, config={}))
        study = results.create_study(session, results.StudyEntry(
            name=name, optuna_study_name=name, hardware=hardware, target=target,
                                     engine="embedded", objective="throughput", search_space={}, slo={},
                                     workload_name="w", workload_fingerprint="0" * 64))
        results.record_trial(session, study.id, results.TrialEntry(
            trial_number=0, method="none", depth=0, concurrency=1, state="failed",
                             reason="not measured"))
        print(f"revision {migrate.current_revision(database.engine)}", flush=True)


if __name__ == "__main__":
    main()
