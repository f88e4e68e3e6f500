"""How fast is `autotune profiles best` with 100,000 stored measurements? (figures, not a test)

Fills a scratch SQLite file and a scratch PostgreSQL database with the same synthetic data (bulk
inserts), then times :func:`autotune.profiles.query.find_best` on an open session (the query
work the indexes serve) and :func:`autotune.profiles.best_profile` end to end (opening the
database and checking its schema included), and prints median and p95 side by side.

The data is skewed on purpose: half of the studies belong to one (hardware, model) pair, so the
"hot" requests have 50,000 candidate measurements to choose from.

    python bench/bench_profiles_best.py                      # 100,000 measurements
    python bench/bench_profiles_best.py --measurements 20000 --repeats 50
    AUTOTUNE_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/test python bench/...
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, insert, text
from sqlalchemy.engine import make_url

from autotune.profiles import query
from autotune.store import open_database
from autotune.store.tables import (
    DeploymentProfileRecord,
    HardwareRecord,
    MeasurementRecord,
    ModelRecord,
    StudyRecord,
)

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
METHOD_DEPTHS = {"none": [0], "mtp": [1, 2, 3, 4], "draft": [1, 2, 3, 4, 5, 6], "ngram": [1, 2, 3]}
CONCURRENCIES = [1, 2, 4, 8, 16, 32, 64]
HARDWARE, TARGETS, STUDIES = 4, 5, 100
CHUNK = 5_000
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def fill(url: str, measurements: int, seed: int = 0) -> None:
    """Hardware, models, studies with one profile each, and ``measurements`` trials in bulk."""
    rng = random.Random(seed)
    with open_database(url) as database, database.engine.begin() as connection:
        connection.execute(insert(HardwareRecord), [
            {"id": h + 1, "fingerprint": f"hw{h:014d}", "name": f"bench-gpu-{h}", "device_type": "cuda",
             "device_count": 1, "memory_total_bytes": 80 * 2**30, "spec": {}, "created_at": T0} for h in range(HARDWARE)])
        connection.execute(insert(ModelRecord), [
            {"id": m + 1, "fingerprint": f"model{m:011d}", "name": f"bench-model-{m}", "role": "target" if m < TARGETS else "draft",
             "source": f"/models/{m}", "num_params": 10**9, "num_mtp_modules": 4, "vocab_size": 32000, "config": {},
             "created_at": T0} for m in range(TARGETS + 2)])
        # Study s: half on the hot pair (hardware 1, model 1), the rest spread over all pairs.
        pairs = [(1, 1) if s < STUDIES // 2 else (1 + s % HARDWARE, 1 + s % TARGETS) for s in range(STUDIES)]
        connection.execute(insert(StudyRecord), [
            {"id": s + 1, "name": f"bench-study-{s}", "optuna_study_name": f"bench-{s}", "hardware_id": hw,
             "target_model_id": target, "engine": "embedded", "objective": "throughput", "search_space": {}, "slo": {},
             "workload_name": "builtin", "workload_fingerprint": "w" * 16, "status": "complete",
             "created_at": T0 + dt.timedelta(hours=s)} for s, (hw, target) in enumerate(pairs)])
        configs = [(m, d) for m, depths in METHOD_DEPTHS.items() for d in depths]
        rows, per_study = [], measurements // STUDIES
        for s in range(STUDIES):
            for trial in range(per_study):
                method, depth = configs[trial % len(configs)]
                concurrency = CONCURRENCIES[(trial // len(configs)) % len(CONCURRENCIES)]
                tokens_per_s = rng.uniform(50, 5000)
                failed = rng.random() < 0.05
                rows.append({
                    "study_id": s + 1, "trial_number": trial, "method": method, "depth": depth, "concurrency": concurrency,
                    "draft_model_id": TARGETS + 1 if method == "draft" else None, "state": "failed" if failed else "complete",
                    "tokens_per_s": None if failed else tokens_per_s, "tpot_ms_p50": None if failed else 1000 * concurrency / tokens_per_s,
                    "speedup": rng.uniform(0.5, 2.5), "acceptance_by_position": [], "extra": {},
                    "created_at": T0 + dt.timedelta(seconds=trial),
                })
                if len(rows) == CHUNK:
                    connection.execute(insert(MeasurementRecord), rows)
                    rows = []
        if rows:
            connection.execute(insert(MeasurementRecord), rows)
        connection.execute(insert(DeploymentProfileRecord), [
            {"study_id": s + 1, "hardware_id": hw, "target_model_id": target, "method": "mtp", "depth": 2, "concurrency": 8,
             "objective": "throughput", "tokens_per_s": rng.uniform(1000, 5000), "tpot_ms_p50": 5.0, "speedup": 1.5,
             "per_concurrency": [], "details": {}, "created_at": T0 + dt.timedelta(hours=s, minutes=30)}
            for s, (hw, target) in enumerate(pairs)])
    # Statistics and (PostgreSQL) the visibility map, as autovacuum keeps them in a live database.
    engine = create_engine(make_url(url).set(drivername="postgresql+psycopg") if url.startswith("postgresql") else url,
                           isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text("VACUUM ANALYZE" if connection.dialect.name == "postgresql" else "ANALYZE"))
    engine.dispose()


REQUESTS = {
    "hot, any batch": {"model": "bench-model-0", "hardware": "bench-gpu-0"},
    "hot, batch 8": {"model": "bench-model-0", "hardware": "bench-gpu-0", "concurrency": 8},
    "hot, batch 8, TPOT<=2ms": {"model": "bench-model-0", "hardware": "bench-gpu-0", "concurrency": 8, "slo_tpot_ms": 2.0},
    "hot, TPOT<=0.5ms": {"model": "bench-model-0", "hardware": "bench-gpu-0", "slo_tpot_ms": 0.5},
    "cold, batch 32": {"model": "bench-model-3", "hardware": "bench-gpu-3", "concurrency": 32},
}


def timings(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median and p95 in milliseconds, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]


def measure(url: str, repeats: int) -> dict[str, tuple[float, float]]:
    results = {}
    with open_database(url) as database:
        for label, request in REQUESTS.items():
            model = request["model"]
            options = {k: v for k, v in request.items() if k != "model"}

            def in_session() -> None:
                with database.session() as session:
                    query.find_best(session, model, **options)

            results[f"{label} (query)"] = timings(in_session, repeats)
    request = REQUESTS["hot, batch 8, TPOT<=2ms"]
    options = {k: v for k, v in request.items() if k != "model"}
    results["hot, batch 8, TPOT<=2ms (best_profile: open + query)"] = timings(
        lambda: query.best_profile(url, request["model"], **options), max(10, repeats // 5))
    return results


@contextmanager
def sqlite_database() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as folder:
        yield f"sqlite:///{Path(folder) / 'bench.db'}"


@contextmanager
def postgres_database(server: str) -> Iterator[str]:
    admin_url = make_url(server).set(drivername="postgresql+psycopg")
    name = f"autotune_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measurements", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--postgres-url", default=os.environ.get("AUTOTUNE_TEST_POSTGRES_URL", DEFAULT_POSTGRES))
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()

    backends = {"SQLite": sqlite_database()}
    if not args.no_postgres:
        backends["PostgreSQL"] = postgres_database(args.postgres_url)
    results = {}
    for name, database in backends.items():
        with database as url:
            start = time.perf_counter()
            fill(url, args.measurements)
            print(f"{name}: filled {args.measurements:,} measurements in {time.perf_counter() - start:.1f} s")
            results[name] = measure(url, args.repeats)
    names = list(results)
    print(f"\n{'request':58}" + "".join(f"{n + ' median/p95 ms':>28}" for n in names))
    for label in results[names[0]]:
        print(f"{label:58}" + "".join(f"{results[n][label][0]:>16.2f} / {results[n][label][1]:>7.2f}  " for n in names))


if __name__ == "__main__":
    main()
