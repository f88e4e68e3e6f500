"""Synthetic tuning studies for the profile tests, written through the store's own writers
(:mod:`autotune.store.results`, :mod:`autotune.store.repository`), as the tuner writes them.

Figures follow the speculative-decoding speedup model of DESIGN.md section 3, with a verify cost
that grows with the concurrency so that the best depth shrinks and speculation loses at large
batches, as on real hardware:

    S(method, depth, batch) = omega(alpha, depth) / (depth * c + 1 + depth * batch / 16)

with alpha and c per method. Screening trials (one pass each) measure exactly the model; a study
with ``confirm=True`` then has a confirmation run as the tuner writes it: at each concurrency the
best screened configuration of each method (and the next fastest, up to four finalists) measured
with the baseline in ``ROUNDS`` interleaved rounds, each round off the model by a fixed, zero-mean
pattern, with 95 % intervals and the paired speedup computed by autotune.analysis.intervals.

The profile is what :mod:`autotune.analysis.decision` recommends at the chosen concurrency (the tie
rule included), with the per-concurrency table in the tuner's format (ConcurrencyBest dicts).
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import replace

from sqlalchemy.orm import Session

from autotune.analysis import decision
from autotune.analysis.intervals import mean_interval, paired_ratio_interval
from autotune.store import repository, results
from autotune.store.tables import DeploymentProfileRecord, HardwareRecord, ModelRecord

CONCURRENCIES = (1, 2, 4, 8, 16)
DEPTHS = {"none": (0,), "mtp": (1, 2, 3, 4), "draft": (1, 2, 3, 4), "ngram": (1, 2, 3)}
ALPHA = {"mtp": 0.8, "draft": 0.65, "ngram": 0.4}
DRAFT_COST = {"mtp": 0.1, "draft": 0.25, "ngram": 0.0}
MEMORY_OVERHEAD = {"none": 0.0, "mtp": 0.03, "draft": 0.25, "ngram": 0.0}
T0 = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.timezone.utc)
# The confirmation rounds: each configuration's tokens/s per round is the model's times (1 + e), e
# from this zero-mean pattern rotated by the configuration's place in the run (so pairs differ).
NOISE = (0.012, -0.008, 0.004, -0.015, 0.007)
ROUNDS = len(NOISE)
MAX_FINALISTS = 4


def omega(alpha: float, depth: int) -> float:
    """Expected tokens per target pass: (1 - alpha^(depth+1)) / (1 - alpha)."""
    return (1 - alpha ** (depth + 1)) / (1 - alpha)


def speedup(method: str, depth: int, concurrency: int) -> float:
    if method == "none":
        return 1.0
    return omega(ALPHA[method], depth) / (depth * DRAFT_COST[method] + 1 + depth * concurrency / 16)


def baseline_tokens_per_s(concurrency: int, scale: float = 1.0) -> float:
    return scale * 100.0 * concurrency / (1 + 0.05 * concurrency)


def hardware(session: Session, name: str = "1x NVIDIA H100 80GB HBM3", fingerprint: str = "aaaa111122223333") -> HardwareRecord:
    return repository.upsert_hardware(session, fingerprint=fingerprint, name=name, device_type="cuda", device_count=1,
                                      memory_total_bytes=80 * 2**30, spec={"devices": []})


def model(session: Session, name: str, fingerprint: str, role: str = "target", source: str | None = None,
          num_mtp_modules: int = 4) -> ModelRecord:
    return results.upsert_model(session, results.ModelEntry(
        fingerprint=fingerprint, name=name, role=role, source=source or f"/models/{name}",
                                num_params=1_000_000, num_mtp_modules=num_mtp_modules if role == "target" else 0,
                                vocab_size=256, config={"n_layer": 4}))


def study(
    session: Session,
    name: str,
    hw: HardwareRecord,
    target: ModelRecord,
    draft: ModelRecord | None = None,
    *,
    methods: tuple[str, ...] = ("none", "mtp", "draft", "ngram"),
    concurrencies: tuple[int, ...] = CONCURRENCIES,
    scale: float = 1.0,
    profile_concurrency: int = 1,
    failed_trials: int = 1,
    confirm: bool = False,
) -> DeploymentProfileRecord:
    """A finished study with one screening trial per (method, depth, concurrency), some failed
    trials, a confirmation run if ``confirm``, and its deployment profile at
    ``profile_concurrency``. The draft's label is its name."""
    session.flush()  # ids for the hardware and models
    record = results.create_study(
        session, results.StudyEntry(
            name=name, optuna_study_name=f"optuna-{name}", hardware=hw, target=target, engine="embedded",
            objective="throughput", search_space={"methods": list(methods)}, slo={}, workload_name="builtin",
            workload_fingerprint="w" * 16))
    number = itertools.count()
    for method in methods:
        for depth in DEPTHS[method]:
            for concurrency in concurrencies:
                uses_draft = method == "draft" and draft is not None
                results.record_trial(
                    session, record.id, results.TrialEntry(
                        trial_number=next(number), method=method, depth=depth, concurrency=concurrency,
                        state="complete", draft=draft.name if uses_draft else None,
                        draft_model_id=draft.id if uses_draft else None,
                        measurement=_measurement(method, depth, concurrency, scale)))
    for _ in range(failed_trials):
        results.record_trial(session, record.id, results.TrialEntry(trial_number=next(number), method="draft", depth=16,
                             concurrency=max(concurrencies), state="failed", reason="out of memory",
                             draft=draft.name if draft else None, draft_model_id=draft.id if draft else None))
    results.set_study_status(session, record.id, "complete")
    if confirm:
        _confirm(session, record.id, concurrencies, scale, draft)
    rows = results.study_rows(session, record.id)
    deciding = decision.deciding_rows(rows)
    choice = decision.decide_at(deciding, profile_concurrency, decision.NO_SLO)
    chosen = choice.recommended
    table = decision.per_concurrency(rows, concurrencies, decision.NO_SLO)
    return results.save_profile(
        session, record, results.ProfileEntry(measurement_id=chosen.measurement_id, method=chosen.method,
        draft_model_id=draft.id if chosen.method == "draft" and draft else None, depth=chosen.depth,
        concurrency=chosen.concurrency, tokens_per_s=chosen.tokens_per_s, tpot_ms_p50=chosen.tpot_ms_p50,
        speedup=chosen.speedup, per_concurrency=[entry.to_dict() for entry in table],
        repetitions=chosen.repetitions, intervals=chosen.intervals,
        details={"label": chosen.label, "draft": chosen.draft, "max_ngram": 3, "confirmed": chosen.confirmed,
                 "phase": chosen.phase, "tied_with": [decision.config_label(r) for r in choice.tied]}))


def finalists(rows: list[results.TrialRow], concurrency: int) -> list[results.TrialRow]:
    """The screened configurations confirmed at ``concurrency``: the best of each speculative
    method, then the next fastest, at most MAX_FINALISTS (the baseline is measured besides)."""
    here = sorted((r for r in decision.screening_rows(rows) if r.concurrency == concurrency and r.method != "none"),
                  key=lambda r: -r.tokens_per_s)
    best_of_method = list({r.method: r for r in reversed(here)}.values())
    picked: list[results.TrialRow] = []
    for row in sorted(best_of_method, key=lambda r: -r.tokens_per_s) + here:
        if row not in picked and len(picked) < MAX_FINALISTS:
            picked.append(row)
    return picked


def _confirm(session: Session, study_id: int, concurrencies: tuple[int, ...], scale: float,
             draft: ModelRecord | None) -> None:
    """One confirmation run, stored as the tuner stores it (phase, repetitions, intervals, paired
    speedup, samples and rounds in extra)."""
    rows = results.study_rows(session, study_id)
    screened = len(decision.screening_rows(rows))
    number = itertools.count()
    for concurrency in concurrencies:
        configs = [("none", 0)] + [(r.method, r.depth) for r in finalists(rows, concurrency)]
        samples = {}
        for k, (method, depth) in enumerate(configs):
            value = baseline_tokens_per_s(concurrency, scale) * speedup(method, depth, concurrency)
            samples[(method, depth)] = [value * (1 + NOISE[(i + 2 * k) % ROUNDS]) for i in range(ROUNDS)]
        base = samples[("none", 0)]
        for method, depth in configs:
            mine = samples[(method, depth)]
            measurement = _measurement(method, depth, concurrency, scale)
            tpot = [1000.0 * concurrency / s for s in mine]
            estimates = {"tokens_per_s": mean_interval(mine), "tpot_ms_p50": mean_interval(tpot)}
            if method != "none":
                estimates["speedup"] = paired_ratio_interval(mine, base)
            measurement.update(tokens_per_s=estimates["tokens_per_s"].value, tpot_ms_p50=estimates["tpot_ms_p50"].value)
            uses_draft = method == "draft" and draft is not None
            results.record_trial(
                session, study_id, results.TrialEntry(
                    trial_number=next(number), method=method, depth=depth, concurrency=concurrency,
                    state="complete", draft=draft.name if uses_draft else None,
                    draft_model_id=draft.id if uses_draft else None,
                    measurement=measurement, phase="confirmation", repetitions=ROUNDS,
                    intervals={name: e.to_dict() for name, e in estimates.items()},
                    speedup=estimates["speedup"].value if method != "none" else 1.0,
                    extra={"samples": mine, "rounds": list(range(ROUNDS)), "noise": {}, "capped": None,
                           "dropped": False, "noisy": False,
                           "confirmation": {"run": 1, "screened": screened, "concurrency": concurrency}}),
            )


def _measurement(method: str, depth: int, concurrency: int, scale: float) -> dict:
    """The figures of a Measurement.to_dict() the store keeps in columns, plus one it keeps in extra."""
    tokens_per_s = baseline_tokens_per_s(concurrency, scale) * speedup(method, depth, concurrency)
    tpot_ms = 1000.0 * concurrency / tokens_per_s
    alpha = ALPHA.get(method)
    base_memory = 2 * 2**30 + concurrency * 64 * 2**20
    return {
        "tokens_per_s": tokens_per_s, "requests_per_s": tokens_per_s / 100, "ttft_ms_p50": 20.0 + concurrency,
        "ttft_ms_p90": 30.0 + concurrency, "ttft_ms_p99": 40.0 + concurrency, "tpot_ms_p50": tpot_ms,
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

    * ``h100-old`` and ``h100-new`` (newest): tiny-target on the H100, both confirmed; the old study
      is faster (scale 1.0 against 0.9) and its profile sits at concurrency 4, the new one's at 1;
    * ``cpu``: tiny-target on the CPU, ten times slower, screening only (no speedups, no intervals);
    * ``other``: other-target on the H100, MTP and none only, screening only.
    """
    from autotune.store import open_database

    with open_database(url) as database, database.session() as session:
        h100, cpu = hardware(session, *H100), hardware(session, *CPU)
        target = model(session, "tiny-target", "tttt000011112222")
        other = model(session, "other-target", "oooo000011112222")
        draft = model(session, "tiny-draft", "dddd000011112222", role="draft")
        profiles = {
            "h100-old": study(session, "h100-old", h100, target, draft, profile_concurrency=4, confirm=True),
            "h100-new": study(session, "h100-new", h100, target, draft, scale=0.9, profile_concurrency=1, confirm=True),
            "cpu": study(session, "cpu", cpu, target, draft, scale=0.1),
            "other": study(session, "other", h100, other, methods=("none", "mtp"), profile_concurrency=2),
        }
        return {name: p.id for name, p in profiles.items()}


def profile_data(method: str = "mtp", depth: int = 3, concurrency: int = 1, per_batch: dict[int, tuple] | None = None,
                 measurements: tuple = (), draft_source: str = "/models/tiny-draft", details: dict | None = None,
                 confirmed: bool = False):  # noqa: ANN201
    """A DeploymentProfile dataclass without a database; ``per_batch`` maps concurrency -> (method,
    depth) or (method, depth, speedup, low, high). ``confirmed``: the profile's figures come with
    their intervals (841.8 tokens/s ±8.4 % over n = 7, 2.19x [1.89, 2.53]), else one screening run."""
    from autotune.profiles.data import DeploymentProfile, HardwareInfo, ModelInfo, StudyInfo

    draft = ModelInfo("dddd000011112222", "tiny-draft", "draft", draft_source) if method == "draft" else None
    if draft:  # the tuner names its draft by label in the table and the details
        details = {"draft": "tiny-draft", **(details or {})}
    rows = []
    for b, entry in sorted((per_batch or {}).items()):
        m, d, *gain = entry
        speedup, low, high = gain if gain else (1.0 if m == "none" else None, None, None)
        rows.append({"concurrency": b, "method": m, "depth": d, "tokens_per_s": 100.0 * b, "speedup": speedup,
                     "speedup_low": low, "speedup_high": high, "repetitions": 7 if low is not None else 1,
                     "confirmed": low is not None, "draft": "tiny-draft" if m == "draft" and draft else None})
    figures = {"tokens_per_s": 123.4, "tpot_ms_p50": 8.1, "speedup": 1.5, "repetitions": 1, "intervals": {}}
    if confirmed:
        figures = {"tokens_per_s": 841.8, "tpot_ms_p50": 4.2, "speedup": 2.19, "repetitions": 7, "intervals": {
            "tokens_per_s": {"value": 841.8, "low": 841.8 * 0.916, "high": 841.8 * 1.084, "n": 7, "confidence": 0.95},
            "tpot_ms_p50": {"value": 4.2, "low": 4.116, "high": 4.284, "n": 7, "confidence": 0.95},
            "speedup": {"value": 2.19, "low": 1.89, "high": 2.53, "n": 7, "confidence": 0.95},
        }}
    return DeploymentProfile(
        id=7, created_at=T0, study=StudyInfo("s", "optuna-s", "embedded", "throughput", "builtin", "w" * 16, "complete", T0),
        hardware=HardwareInfo(H100[1], H100[0], "cuda", 1, 80 * 2**30),
        target=ModelInfo("tttt000011112222", "tiny-target", "target", "/models/tiny-target", num_mtp_modules=4),
        method=method, depth=depth, concurrency=concurrency, objective="throughput", draft=draft,
        per_concurrency=rows, details=details or {}, measurements=tuple(measurements),
        chosen_phase="confirmation" if confirmed else "screening", **figures,
    )


def hostile_profile(name: str):  # noqa: ANN201 - a DeploymentProfile
    """A draft-model profile whose every name, path and free text is ``name``."""
    profile = profile_data("draft", 2, 2, {1: ("draft", 2), 2: ("draft", 2), 8: ("none", 0)},
                                   draft_source=f"{name}-draft", details={"tied_with": ["draft@2", name]})
    rows = [{**row, "note": name} for row in profile.per_concurrency]
    return replace(profile, study=replace(profile.study, name=name, workload_name=name),
                   hardware=replace(profile.hardware, name=name), target=replace(profile.target, name=name, source=name),
                   draft=replace(profile.draft, name=f"{name} draft"), per_concurrency=rows)
