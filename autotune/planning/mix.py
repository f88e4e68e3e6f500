"""``autotune plan --mix``: a plan's predictions carried over to a stated mix of request categories.

A plan predicts each configuration's tokens/s from the acceptance stored for the target on the
study's workload (:mod:`autotune.planning`). When that study's workload carried categories, each of
its measurements stored the acceptance per category (:mod:`autotune.analysis.categories`); a
configuration's prediction is then multiplied by Ω_mix / Ω_measured of the stored measurement of the
same proposer at the same depth (:mod:`autotune.analysis.mix` states the math: a step costs the same
whatever the text, so only the tokens per step change), and its TPOT divided by it, before the plan
chooses: a mix can change which depth wins. Acceptance does not depend on the concurrency (greedy
drafting proposes the same tokens at any concurrency), so one measurement per depth serves every
concurrency. A depth no measurement covered (the model extrapolates past the deepest measured one)
takes the factor of the nearest measured depth, and the plan says so. Method none emits one token
per step whatever the text: factor 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from autotune.analysis.mix import check_mix, mix_factor
from autotune.errors import ConfigurationError

Key = tuple[str, "str | None"]  # (method, draft label): a plan's proposer


def stored_factors(db_url: str | None, sources: Mapping[Key, tuple[int, ...]], mix: Mapping[str, float],
                   workload: str) -> tuple[dict[Key, dict[int, float]], list[str]]:
    """Per proposer (its curve's measurement ids in ``sources``), the mix's factor at each measured
    depth (the newest measurement's), and the notes to print; ConfigurationError when no stored
    measurement of the workload has categories, or the mix names one they lack."""
    from autotune.store import open_database
    from autotune.store.tables import MeasurementRecord

    factors: dict[Key, dict[int, float]] = {}
    seen: dict[str, Any] | None = None
    with open_database(db_url) as database, database.session() as session:
        for key, ids in sources.items():
            by_depth: dict[int, float] = {}
            for measurement_id in sorted(set(ids), reverse=True):  # newest first
                record = session.get(MeasurementRecord, measurement_id)
                stored = ((record.extra or {}).get("measurement") or {}).get("acceptance_by_category") if record else None
                if not stored or record.depth in by_depth:
                    continue
                seen = stored
                check_mix(mix, stored, f"the study on {workload}")
                by_depth[record.depth] = mix_factor(stored, mix)[2]
            if by_depth:
                factors[key] = by_depth
    if seen is None:
        raise ConfigurationError(f"a mix needs a study with categories: no stored measurement on {workload} has "
                                 "acceptance per category; tune on a workload whose requests carry a \"category\" "
                                 "(--workload prose|chat|FILE) first")
    named = ", ".join(f"{name}={share:g}" for name, share in mix.items())
    notes = [f"--mix {named}: each configuration's tokens/s multiplied by its acceptance on the mix over the measured "
             "one (the measurement at its depth; TPOT divided by it)"]
    missing = [f"{method}{':' + draft if draft else ''}" for (method, draft) in sources if (method, draft) not in factors]
    if missing:
        notes.append(f"--mix: no measurement with categories for {', '.join(missing)}: left as measured")
    return factors, notes


def factor_at(by_depth: Mapping[int, float], depth: int) -> tuple[float, bool]:
    """The factor at ``depth``: its own, or the nearest measured depth's (True: borrowed)."""
    if depth in by_depth:
        return by_depth[depth], False
    nearest = min(by_depth, key=lambda d: (abs(d - depth), d))
    return by_depth[nearest], True


def apply_mix(predictions: dict[int, dict[tuple[str, str | None, int], Any]],
              factors: Mapping[Key, Mapping[int, float]]) -> tuple[dict[int, dict[tuple[str, str | None, int], Any]], list[str]]:
    """The predictions (concurrency -> configuration -> Prediction) carried over to the mix; notes
    naming the depths whose factor was borrowed from the nearest measured one."""
    borrowed: set[str] = set()
    carried: dict[int, dict[tuple[str, str | None, int], Any]] = {}
    for concurrency, by_config in predictions.items():
        carried[concurrency] = {}
        for config, prediction in by_config.items():
            method, draft, depth = config
            by_depth = factors.get((method, draft))
            if method == "none" or not by_depth:
                carried[concurrency][config] = prediction
                continue
            factor, lent = factor_at(by_depth, depth)
            if lent:
                borrowed.add(f"{method}{':' + draft if draft else ''}@{depth}")
            carried[concurrency][config] = scaled(prediction, factor)
    notes = [f"--mix: no measurement at {', '.join(sorted(borrowed))}; the nearest measured depth's factor is used"] \
        if borrowed else []
    return carried, notes


def scaled(prediction: Any, factor: float) -> Any:
    """A :class:`autotune.perfmodel.model.Prediction` with tokens/s (and its interval) and the
    acceptance length times ``factor``, TPOT divided by it; TTFT (prefill) unchanged."""
    latency = {name: (value / factor if value is not None and name.startswith("tpot") else value)
               for name, value in prediction.latency_ms.items()}
    if not math.isfinite(factor) or factor <= 0:
        raise ValueError(f"a mix factor must be a positive number, got {factor}")
    return replace(prediction, tokens_per_s=prediction.tokens_per_s * factor, low=prediction.low * factor,
                   high=prediction.high * factor, omega=prediction.omega * factor, latency_ms=latency)
