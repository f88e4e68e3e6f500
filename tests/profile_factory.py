"""Synthetic tuning studies for the profile tests, written through the store's own writers
(:mod:`autotune.store.results`, :mod:`autotune.store.repository`), as the tuner writes them.

Figures follow the speculative-decoding speedup model of DESIGN.md section 3, with a verify cost
that grows with the batch size so that the best depth shrinks and speculation loses at large
batches, as on real hardware:

    S(method, depth, batch) = omega(alpha, depth) / (depth * c + 1 + depth * batch / 16)

with alpha and c per method. The profile is the fastest trial at the chosen batch size, with the
per-batch-size table of winners in the tuner's format (autotune.search.result.BatchSizeBest).
"""

from __future__ import annotations

import datetime as dt
import itertools

from sqlalchemy.orm import Session

from autotune.store import repository, results
from autotune.store.models import DeploymentProfileRecord, HardwareRecord, ModelRecord

BATCH_SIZES = (1, 2, 4, 8, 16)
DEPTHS = {"none": (0,), "mtp": (1, 2, 3, 4), "draft": (1, 2, 3, 4), "ngram": (1, 2, 3)}
ALPHA = {"mtp": 0.8, "draft": 0.65, "ngram": 0.4}
DRAFT_COST = {"mtp": 0.1, "draft": 0.25, "ngram": 0.0}
MEMORY_OVERHEAD = {"none": 0.0, "mtp": 0.03, "draft": 0.25, "ngram": 0.0}
T0 = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.timezone.utc)


def omega(alpha: float, depth: int) -> float:
    """Expected tokens per target pass: (1 - alpha^(depth+1)) / (1 - alpha)."""
    return (1 - alpha ** (depth + 1)) / (1 - alpha)


def speedup(method: str, depth: int, batch_size: int) -> float:
    if method == "none":
        return 1.0
    return omega(ALPHA[method], depth) / (depth * DRAFT_COST[method] + 1 + depth * batch_size / 16)


def baseline_tokens_per_s(batch_size: int, scale: float = 1.0) -> float:
    return scale * 100.0 * batch_size / (1 + 0.05 * batch_size)


def hardware(session: Session, name: str = "1x NVIDIA H100 80GB HBM3", fingerprint: str = "aaaa111122223333") -> HardwareRecord:
    return repository.upsert_hardware(session, fingerprint=fingerprint, name=name, device_type="cuda", device_count=1,
                                      memory_total_bytes=80 * 2**30, spec={"devices": []})


def model(session: Session, name: str, fingerprint: str, role: str = "target", source: str | None = None,
          num_mtp_modules: int = 4) -> ModelRecord:
    return results.upsert_model(session, fingerprint=fingerprint, name=name, role=role, source=source or f"/models/{name}",
                                num_params=1_000_000, num_mtp_modules=num_mtp_modules if role == "target" else 0,
                                vocab_size=256, config={"n_layer": 4})


def study(
    session: Session,
    name: str,
    hw: HardwareRecord,
    target: ModelRecord,
    draft: ModelRecord | None = None,
    *,
    methods: tuple[str, ...] = ("none", "mtp", "draft", "ngram"),
    batch_sizes: tuple[int, ...] = BATCH_SIZES,
    scale: float = 1.0,
    profile_batch_size: int = 1,
    failed_trials: int = 1,
) -> DeploymentProfileRecord:
    """A finished study with one trial per (method, depth, batch size), some failed trials, and
    its deployment profile at ``profile_batch_size``. The draft's label is its name."""
    session.flush()  # ids for the hardware and models
    record = results.create_study(
        session, name=name, optuna_study_name=f"optuna-{name}", hardware=hw, target=target, engine="embedded",
        objective="throughput", search_space={"methods": list(methods)}, slo={}, workload_name="builtin",
        workload_fingerprint="w" * 16)
    number = itertools.count()
    for method in methods:
        for depth in DEPTHS[method]:
            for batch_size in batch_sizes:
                uses_draft = method == "draft" and draft is not None
                results.record_trial(
                    session, record.id, trial_number=next(number), method=method, depth=depth, batch_size=batch_size,
                    state="complete", draft=draft.name if uses_draft else None,
                    draft_model_id=draft.id if uses_draft else None,
                    measurement=_measurement(method, depth, batch_size, scale))
    for _ in range(failed_trials):
        results.record_trial(session, record.id, trial_number=next(number), method="draft", depth=16,
                             batch_size=max(batch_sizes), state="failed", reason="out of memory",
                             draft=draft.name if draft else None, draft_model_id=draft.id if draft else None)
    results.set_study_status(session, record.id, "complete")
    rows = [row for row in results.study_rows(session, record.id) if row.state == "complete"]
    best = {}
    for row in rows:
        if row.batch_size not in best or row.tokens_per_s > best[row.batch_size].tokens_per_s:
            best[row.batch_size] = row
    base = {row.batch_size: row for row in rows if row.method == "none"}
    chosen = best[profile_batch_size]
    table = [
        {"batch_size": b, "baseline_tokens_per_s": base[b].tokens_per_s if b in base else None, "label": row.config_label,
         "method": row.method, "draft": row.draft, "depth": row.depth, "tokens_per_s": row.tokens_per_s,
         "speedup": row.speedup, "acceptance_rate": row.acceptance_rate, "acceptance_length": row.acceptance_length,
         "slo_met": True, "trials": sum(1 for r in rows if r.batch_size == b)}
        for b, row in sorted(best.items())
    ]
    return results.save_profile(
        session, record, measurement_id=chosen.measurement_id, method=chosen.method,
        draft_model_id=draft.id if chosen.method == "draft" and draft else None, depth=chosen.depth,
        batch_size=chosen.batch_size, tokens_per_s=chosen.tokens_per_s, tpot_ms_p50=chosen.tpot_ms_p50,
        speedup=chosen.speedup, per_batch_size=table,
        details={"label": chosen.label, "draft": chosen.draft, "max_ngram": 3})


def _measurement(method: str, depth: int, batch_size: int, scale: float) -> dict:
    """The figures of a Measurement.to_dict() the store keeps in columns, plus one it keeps in extra."""
    tokens_per_s = baseline_tokens_per_s(batch_size, scale) * speedup(method, depth, batch_size)
    tpot_ms = 1000.0 * batch_size / tokens_per_s
    alpha = ALPHA.get(method)
    base_memory = 2 * 2**30 + batch_size * 64 * 2**20
    return {
        "tokens_per_s": tokens_per_s, "requests_per_s": tokens_per_s / 100, "ttft_ms_p50": 20.0 + batch_size,
        "ttft_ms_p90": 30.0 + batch_size, "ttft_ms_p99": 40.0 + batch_size, "tpot_ms_p50": tpot_ms,
        "tpot_ms_p90": tpot_ms * 1.2, "tpot_ms_p99": tpot_ms * 1.5, "acceptance_rate": alpha,
        "acceptance_length": omega(alpha, depth) if alpha else 1.0,
        "acceptance_by_position": [round(alpha * 0.95**i, 6) for i in range(depth)] if alpha else [],
        "drafted_tokens": 1000 * depth if alpha else 0, "accepted_tokens": int(1000 * depth * alpha) if alpha else 0,
        "peak_memory_bytes": int(base_memory * (1 + MEMORY_OVERHEAD[method])), "wall_time_s": 2.5,
        "memory_kind": "cuda_max_allocated",
    }

H100 = ("1x NVIDIA H100 80GB HBM3", "aaaa111122223333")
CPU = ("cpu: Test CPU (2 cores, 8 GiB)", "bbbb444455556666")


def populate(url: str) -> dict[str, int]:
    """The standard scenario; returns profile ids by study name.

    * ``h100-old`` and ``h100-new`` (newest): tiny-target on the H100; the old study is faster
      (scale 1.0 against 0.9) and its profile sits at batch size 4, the new one's at 1;
    * ``cpu``: tiny-target on the CPU, ten times slower;
    * ``other``: other-target on the H100, MTP and none only.
    """
    from autotune.store import open_database

    with open_database(url) as database, database.session() as session:
        h100, cpu = hardware(session, *H100), hardware(session, *CPU)
        target = model(session, "tiny-target", "tttt000011112222")
        other = model(session, "other-target", "oooo000011112222")
        draft = model(session, "tiny-draft", "dddd000011112222", role="draft")
        profiles = {
            "h100-old": study(session, "h100-old", h100, target, draft, profile_batch_size=4),
            "h100-new": study(session, "h100-new", h100, target, draft, scale=0.9, profile_batch_size=1),
            "cpu": study(session, "cpu", cpu, target, draft, scale=0.1),
            "other": study(session, "other", h100, other, methods=("none", "mtp"), profile_batch_size=2),
        }
        return {name: p.id for name, p in profiles.items()}


def profile_data(method: str = "mtp", depth: int = 3, batch_size: int = 1, per_batch: dict[int, tuple[str, int]] | None = None,
                 measurements: tuple = (), draft_source: str = "/models/tiny-draft", details: dict | None = None):  # noqa: ANN201
    """A DeploymentProfile dataclass without a database; ``per_batch`` maps batch size -> (method, depth)."""
    from autotune.profiles.data import DeploymentProfile, HardwareInfo, ModelInfo, StudyInfo

    draft = ModelInfo("dddd000011112222", "tiny-draft", "draft", draft_source) if method == "draft" else None
    rows = [{"batch_size": b, "method": m, "depth": d, "tokens_per_s": 100.0 * b, "speedup": 1.0,
             "draft": draft.fingerprint if m == "draft" and draft else None} for b, (m, d) in sorted((per_batch or {}).items())]
    return DeploymentProfile(
        id=7, created_at=T0, study=StudyInfo("s", "optuna-s", "embedded", "throughput", "builtin", "w" * 16, "complete", T0),
        hardware=HardwareInfo(H100[1], H100[0], "cuda", 1, 80 * 2**30),
        target=ModelInfo("tttt000011112222", "tiny-target", "target", "/models/tiny-target", num_mtp_modules=4),
        method=method, depth=depth, batch_size=batch_size, objective="throughput", draft=draft,
        tokens_per_s=123.4, tpot_ms_p50=8.1, speedup=1.5, per_batch_size=rows, details=details or {},
        measurements=tuple(measurements),
    )
