"""Finding deployment profiles: list with filters, show one, and pick the best for a request.

``hardware`` arguments accept a machine name, a fingerprint (or a unique prefix of one) or
``"current"``: the fingerprint of this machine, computed the way ``autotune probe`` computes it.
``model`` arguments accept a model name or fingerprint (prefix).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.orm import Session

from autotune.errors import ConfigurationError, ProfileNotFoundError
from autotune.profiles import records
from autotune.profiles.data import METHODS, DeploymentProfile, trial_document
from autotune.store import open_database, profile_queries, repository
from autotune.store.tables import HardwareRecord, MeasurementRecord, ModelRecord
from autotune.store.results import TrialRow, trial_row

CURRENT_HARDWARE = "current"
# The largest id a row can have on every backend (PostgreSQL INTEGER): a larger one is not looked up,
# since the database would reject the number itself (SQLite: OverflowError) rather than find nothing.
MAX_ID = 2**31 - 1


@functools.cache
def current_fingerprint() -> str:
    """This machine's hardware fingerprint, as the tuner stored it (cached per process).

    A quick probe (about a second plus the torch import): the fingerprint depends on which device
    the probe can benchmark (a GPU that torch cannot use is not "this hardware" for the tuner).
    """
    from autotune.hardware import probe_hardware

    return probe_hardware(quick=True).fingerprint


def list_profiles(
    db_url: str | None = None,
    *,
    hardware: str | None = None,
    model: str | None = None,
    method: str | None = None,
    study: str | None = None,
) -> list[DeploymentProfile]:
    """Stored deployment profiles, newest first, filtered by hardware, target model, method and study.

    An unknown hardware, model or study name is an error (naming what is stored); the hardware of
    ``"current"`` simply has no profiles when nothing was tuned on this machine yet.
    """
    if method is not None and method not in METHODS:
        raise ConfigurationError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    with open_database(db_url) as database, database.session() as session:
        hardware_ids = _hardware_ids(session, hardware)
        target_ids = _target_ids(session, model)
        study_ids = None
        if study is not None:
            record = profile_queries.find_study(session, study)
            if record is None:
                raise ProfileNotFoundError(_unknown_study(session, study))
            study_ids = [record.id]
        found = profile_queries.find_profiles(
            session, hardware_ids=hardware_ids, target_ids=target_ids, method=method, study_ids=study_ids
        )
        return [records.deployment_profile(session, r) for r in found]


def show_profile(db_url: str | None, profile_id: int, *, with_measurements: bool = True) -> DeploymentProfile:
    """One profile by id, with its study's trials unless ``with_measurements`` is False."""
    with open_database(db_url) as database, database.session() as session:
        return load_profile(session, profile_id, with_measurements=with_measurements)


def load_profile(session: Session, profile_id: int, *, with_measurements: bool = True) -> DeploymentProfile:
    """:func:`show_profile` on an open session."""
    record = profile_queries.get_profile(session, profile_id) if 1 <= profile_id <= MAX_ID else None
    if record is None:
        newest = profile_queries.find_profiles(session)[:5]
        hint = f"newest ids: {', '.join(str(r.id) for r in newest)}" if newest else "the database holds no profile yet"
        raise ProfileNotFoundError(f"no deployment profile with id {profile_id} ({hint}; see `autotune profiles list`)")
    return records.deployment_profile(session, record, with_measurements=with_measurements)


@dataclass(frozen=True)
class BestProfile:
    """The answer to "what should I deploy": a stored profile and the configuration to run.

    Without a concurrency or SLO the configuration is the profile's own. With them it is the
    fastest measured trial of the profile's study that fits (``operating_point``), which may use
    another method or depth than the profile's headline (speculation often loses at large batches).
    """

    profile: DeploymentProfile
    operating_point: TrialRow | None
    request: dict[str, Any]

    def deployment(self) -> DeploymentProfile:
        """The profile with method, depth, draft, concurrency and figures of the operating point,
        ready for :func:`autotune.serving.export_profile`."""
        point = self.operating_point
        if point is None:
            return self.profile
        return replace(
            self.profile,
            method=point.method,
            depth=point.depth,
            draft=self.profile.model_by_fingerprint(point.draft_fingerprint),
            concurrency=point.concurrency,
            tokens_per_s=point.tokens_per_s,
            tpot_ms_p50=point.tpot_ms_p50,
            speedup=point.speedup,
            repetitions=point.repetitions,
            intervals={name: dict(value) for name, value in point.intervals.items()},
            chosen_trial=point.trial_number,
            chosen_phase=point.phase,
            details=self._point_details(),
        )

    def _point_details(self) -> dict[str, Any]:
        """The profile's details, less what describes its own chosen trial (label, trial, ties)."""
        point = self.operating_point
        details = {k: v for k, v in self.profile.details.items() if k not in ("label", "trial", "tied_with")}
        details.update(confirmed=point.confirmed, phase=point.phase)
        return details

    def to_dict(self) -> dict[str, Any]:
        return {
            "request": dict(self.request),
            "profile": self.profile.summary(),
            "operating_point": trial_document(self.operating_point) if self.operating_point else None,
            "deployment": self.deployment().summary(),
        }


def best_profile(
    db_url: str | None,
    model: str,
    *,
    hardware: str | None = CURRENT_HARDWARE,
    concurrency: int | None = None,
    slo_tpot_ms: float | None = None,
) -> BestProfile:
    """The best stored profile of ``model`` on ``hardware`` (None: any machine) for the request.

    No concurrency and no SLO: the profile with the highest tokens/s. Otherwise the fastest
    complete trial among the matching profiles' studies at ``concurrency`` with TPOT p50 <=
    ``slo_tpot_ms``. Raises ProfileNotFoundError naming the nearest stored match when none fits.
    """
    _check_request(concurrency, slo_tpot_ms)
    with open_database(db_url) as database, database.session() as session:
        return find_best(session, model, hardware=hardware, concurrency=concurrency, slo_tpot_ms=slo_tpot_ms)


def find_best(
    session: Session,
    model: str,
    *,
    hardware: str | None = CURRENT_HARDWARE,
    concurrency: int | None = None,
    slo_tpot_ms: float | None = None,
) -> BestProfile:
    """:func:`best_profile` on an open session."""
    request = {"model": model, "hardware": hardware, "concurrency": concurrency, "slo_tpot_ms": slo_tpot_ms}
    targets = _targets(session, model)
    hardware_rows = _hardware_rows(session, hardware)
    hardware_ids = None if hardware_rows is None else [h.id for h in hardware_rows]
    candidates = profile_queries.profile_candidates(session, hardware_ids=hardware_ids, target_ids=[t.id for t in targets])
    if not candidates:
        raise ProfileNotFoundError(_no_profile_message(session, model, targets, hardware, hardware_rows))
    if concurrency is None and slo_tpot_ms is None:
        top = max(candidates, key=lambda c: (c.tokens_per_s if c.tokens_per_s is not None else float("-inf"), c.created_at, c.id))
        return BestProfile(load_profile(session, top.id, with_measurements=False), None, request)

    newest_of_study: dict[int, int] = {}
    for candidate in candidates:  # newest first: keep each study's newest profile
        newest_of_study.setdefault(candidate.study_id, candidate.id)
    studies = list(newest_of_study)
    # Confirmed figures (repeated, paired) first; single screening passes only where none fits.
    point = (profile_queries.best_measurement(session, studies, concurrency=concurrency, max_tpot_ms=slo_tpot_ms)
             or profile_queries.best_measurement(session, studies, concurrency=concurrency, max_tpot_ms=slo_tpot_ms,
                                                 phase="screening"))
    if point is None:
        raise ProfileNotFoundError(_no_fit_message(session, studies, model, concurrency, slo_tpot_ms))
    profile = load_profile(session, newest_of_study[point.study_id], with_measurements=False)
    drafts = profile_queries.models_by_id(session, [point.draft_model_id] if point.draft_model_id else [])
    if drafts:  # the operating point may use a draft other than the profile's headline one
        profile = replace(profile, draft_models=tuple(records.model_info(m) for m in drafts.values()))
    return BestProfile(profile, trial_row(point), request)


def _check_request(concurrency: int | None, slo_tpot_ms: float | None) -> None:
    if concurrency is not None and (not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1):
        raise ConfigurationError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    if slo_tpot_ms is not None and not (isinstance(slo_tpot_ms, (int, float)) and slo_tpot_ms > 0):
        raise ConfigurationError(f"the TPOT SLO must be a number of milliseconds > 0, got {slo_tpot_ms!r}")


def _hardware_rows(session: Session, hardware: str | None) -> list[HardwareRecord] | None:
    """Rows for a hardware argument; None for no filter; [] for "current" when it was never stored."""
    if hardware is None:
        return None
    if hardware == CURRENT_HARDWARE:
        record = profile_queries.hardware_by_fingerprint(session, current_fingerprint())
        return [record] if record else []
    rows = profile_queries.find_hardware(session, hardware)
    if not rows:
        raise ProfileNotFoundError(
            f"no hardware named {hardware!r} is stored (known: "
            f"{profile_queries.stored_names(repository.list_hardware(session))}); "
            "use a name or fingerprint from `autotune profiles list`, or 'current'"
        )
    return rows


def _hardware_ids(session: Session, hardware: str | None) -> list[int] | None:
    rows = _hardware_rows(session, hardware)
    return None if rows is None else [h.id for h in rows]


def _targets(session: Session, model: str) -> list[ModelRecord]:
    targets = [m for m in profile_queries.find_models(session, model) if m.role == "target"]
    if not targets:
        tuned = [m for m, _ in profile_queries.profile_counts_by_target(session, None)]
        raise ProfileNotFoundError(
            f"no target model {model!r} is stored; models with profiles: {profile_queries.stored_names(tuned)}"
        )
    return targets


def _target_ids(session: Session, model: str | None) -> list[int] | None:
    return None if model is None else [t.id for t in _targets(session, model)]


def _unknown_study(session: Session, study: str) -> str:
    names = profile_queries.study_names(session)
    return f"no study {study!r} is stored (newest: {', '.join(names) or 'none'})"


def _no_profile_message(
    session: Session, model: str, targets: list[ModelRecord], hardware: str | None, hardware_rows: list | None
) -> str:
    where = "any hardware" if hardware is None else f"hardware {hardware!r}"
    if hardware == CURRENT_HARDWARE:
        where = f"this machine (fingerprint {current_fingerprint()})"
    elsewhere = profile_queries.profile_counts_by_hardware(session, [t.id for t in targets])
    if elsewhere:
        nearest = ", ".join(f"{h.name} ({h.fingerprint}, {n} profile{'s' * (n > 1)})" for h, n in elsewhere[:3])
        return (
            f"no deployment profile for {model!r} on {where}; nearest: the same model on {nearest} "
            f"(pass --hardware NAME, or tune it here with `autotune tune`)"
        )
    others = profile_queries.profile_counts_by_target(session, None if hardware_rows is None else [h.id for h in hardware_rows])
    suggestion = f"; profiles on {where} exist for: {profile_queries.stored_names([m for m, _ in others])}" if others else ""
    return f"no deployment profile for {model!r} on any hardware{suggestion} (tune it with `autotune tune`)"


def _no_fit_message(
    session: Session, study_ids: list[int], model: str, concurrency: int | None, slo_tpot_ms: float | None
) -> str:
    measured = profile_queries.measured_concurrencies(session, study_ids)
    if concurrency is not None and concurrency not in measured:
        if not measured:
            return f"the profiles for {model!r} have no complete measurement to choose from"
        nearest = min(measured, key=lambda b: (abs(b - concurrency), b))
        return (
            f"no profile for {model!r} was measured at concurrency {concurrency}; nearest measured concurrency: "
            f"{nearest} (measured: {', '.join(map(str, measured))})"
        )
    fastest = profile_queries.fastest_tpot(session, study_ids, concurrency)
    at = f" at concurrency {concurrency}" if concurrency is not None else ""
    if fastest is None:
        return f"no measurement of {model!r}{at} recorded a TPOT, so none can meet TPOT p50 <= {slo_tpot_ms} ms"
    return (
        f"no configuration of {model!r}{at} meets TPOT p50 <= {slo_tpot_ms:g} ms; the fastest measured is "
        f"{fastest.tpot_ms_p50:.3g} ms ({_label(fastest)} at concurrency {fastest.concurrency})"
    )


def _label(record: MeasurementRecord) -> str:
    return record.method if record.method == "none" else f"{record.method}@{record.depth}"
