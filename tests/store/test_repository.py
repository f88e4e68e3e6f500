"""Store round trips on SQLite and PostgreSQL: every table written and read back."""

from __future__ import annotations

from autotune.store import open_database, repository
from autotune.store.tables import (
    DeploymentProfileRecord,
    HardwareRecord,
    MeasurementRecord,
    ModelRecord,
    StudyRecord,
)

SPEC = {"cpu_model": "Test CPU", "logical_cores": 2, "devices": []}
METRICS = [{"name": "memory_bw_gbps", "unit": "GB/s", "measured": 9.5, "peak": None}]


def add_hardware(session, fingerprint: str = "abc123") -> HardwareRecord:
    return repository.upsert_hardware(
        session, fingerprint=fingerprint, name="cpu: Test", device_type="cpu",
        device_count=1, memory_total_bytes=24 * 1024**3, spec=SPEC,
    )


def test_hardware_and_probes_roundtrip(db_url: str) -> None:
    with open_database(db_url) as db:
        with db.session() as session:
            hardware = add_hardware(session)
            repository.add_probe(session, hardware, method_version=1, quick=True, duration_s=1.5, metrics=METRICS)
        with db.session() as session:  # same machine again: one hardware row, two probes
            hardware = add_hardware(session)
            repository.add_probe(session, hardware, method_version=1, quick=False, duration_s=9.0, metrics=METRICS)
        with db.session() as session:
            (stored,) = repository.list_hardware(session)
            assert stored.spec == SPEC and stored.memory_total_bytes == 24 * 1024**3
            assert [p.quick for p in stored.probes] == [True, False]
            assert repository.latest_probe(session, stored).duration_s == 9.0
            assert stored.probes[0].metrics == METRICS
            assert repository.find_hardware(session, "abc") is stored
            assert repository.find_hardware(session, "cpu: Test") is stored
            assert repository.find_hardware(session, "nope") is None


def test_study_measurement_and_profile_roundtrip(db_url: str) -> None:
    with open_database(db_url) as db:
        with db.session() as session:
            hardware = add_hardware(session)
            target = ModelRecord(fingerprint="t" * 64, name="target", role="target", source="builtin:t",
                                 num_params=7_000_000, num_mtp_modules=2, vocab_size=259, config={"d_model": 320})
            draft = ModelRecord(fingerprint="d" * 64, name="draft", role="draft", source="builtin:d")
            study = StudyRecord(name="s1", optuna_study_name="s1", hardware=hardware, target_model=target,
                                engine="embedded", objective="throughput", search_space={"depth": [1, 8]},
                                workload_name="builtin", workload_fingerprint="w" * 64)
            measurement = MeasurementRecord(
                study=study, trial_number=0, method="draft", draft_model=draft, depth=4, concurrency=2,
                state="complete", tokens_per_s=123.5, acceptance_by_position=[0.9, 0.7, 0.5, 0.3],
                drafted_tokens=400, accepted_tokens=240, speedup=1.4,
            )
            session.add_all([study, measurement])
            session.flush()
            session.add(DeploymentProfileRecord(
                study=study, hardware=hardware, target_model=target, measurement_id=measurement.id,
                method="draft", draft_model=draft, depth=4, concurrency=2, objective="throughput",
                tokens_per_s=123.5, speedup=1.4,
                per_concurrency=[{"concurrency": 2, "method": "draft", "depth": 4, "speedup": 1.4}],
            ))
        with db.session() as session:
            study = session.query(StudyRecord).one()
            (measurement,) = study.measurements
            assert measurement.draft_model.name == "draft"
            assert measurement.acceptance_by_position == [0.9, 0.7, 0.5, 0.3]
            profile = session.query(DeploymentProfileRecord).one()
            assert profile.target_model.num_mtp_modules == 2
            assert profile.per_concurrency[0]["depth"] == 4
            assert profile.created_at.tzinfo is not None or db_url.startswith("sqlite")
