"""Reading a study's trials: best configuration per batch size, the serving plan derived from it,
and the MTP-versus-draft verdict (the Pareto front is :func:`autotune.analysis.decision.pareto_front`).
Pure functions over profile dataclasses.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from autotune.analysis import decision
from autotune.profiles.data import DeploymentProfile
from autotune.store.results import TrialRow

SeriesKey = tuple[str, str | None]  # (method, draft fingerprint): one line in a plot


def series_key(m: TrialRow) -> SeriesKey:
    return (m.method, m.draft_fingerprint)


def complete(measurements: Iterable[TrialRow]) -> list[TrialRow]:
    """The rows that decide: the latest confirmation run's, or the screening trials without one
    (:func:`autotune.analysis.decision.deciding_rows`)."""
    return decision.deciding_rows(measurements)


def best_by_batch_size(measurements: Iterable[TrialRow]) -> dict[int, TrialRow]:
    """The deciding row with the most tokens/s at each batch size, by ascending batch size."""
    return decision.best_by_batch_size(complete(measurements))


def speedup(m: TrialRow) -> float | None:
    """The stored, paired speedup (the baseline's is 1); None where none was measured: a speedup is
    never a ratio to a baseline from another moment."""
    estimate = decision.speedup_estimate(m)
    return estimate.value if estimate is not None else None


def speculation_depths(profile: DeploymentProfile) -> dict[int, int]:
    """Draft tokens per step the profile's method should use at each measured batch size
    (0: speculation off there), by ascending batch size.

    From the profile's per-batch-size table: its depth where the winner is the profile's method,
    0 where the winner is method none; at batch sizes another speculative method won, from the
    profile's own method's fastest trial (0 if the baseline beats it). Without a table, from the
    trials alone. The profile's own batch size always gets the profile's depth.
    """
    if profile.method == "none":
        return {}
    own = [m for m in complete(profile.measurements) if series_key(m) == (profile.method, _fingerprint(profile))]
    own_best = best_by_batch_size(own)
    depths: dict[int, int] = {}
    rows = {int(r["batch_size"]): r for r in profile.per_batch_size if "batch_size" in r}
    for batch_size in sorted(rows) if rows else sorted(own_best):
        row = rows.get(batch_size)
        if row is not None and row.get("method") == profile.method and _same_draft(row, profile):
            depths[batch_size] = int(row["depth"])
        elif row is not None and row.get("method") == "none":
            depths[batch_size] = 0
        elif batch_size in own_best:
            m = own_best[batch_size]
            gain = decision.speedup_estimate(m)
            wins = gain is not None and gain.low is not None and gain.low > 1  # clears 1.0x at 95 %
            depths[batch_size] = m.depth if wins else 0
    depths[profile.batch_size] = profile.depth
    return dict(sorted(depths.items()))


def _fingerprint(profile: DeploymentProfile) -> str | None:
    return profile.draft.fingerprint if profile.draft else None


def _same_draft(row: dict[str, Any], profile: DeploymentProfile) -> bool:
    """Whether a table row's draft is the profile's: both name it by the tuner's label (the row's
    ``draft``, the profile's ``details["draft"]``); a row naming none matches any draft."""
    if profile.method != "draft":
        return True
    return row.get("draft") in (None, profile.details.get("draft"))


@dataclass(frozen=True)
class ServingPlan:
    """Batch limits and speculation schedule for a serving engine.

    ``batch_sizes``: every batch size the study measured (any method). ``depths``: draft length per batch size, made non-increasing (a depth measured best at a larger
    batch is kept for the smaller ones: serving engines require every scheduled draft length to be
    <= the batch-1 one, and the profile's own depth must survive). ``max_concurrency``: speculation
    off above this batch size (when the draft length is otherwise constant); ``draft_len_schedule``:
    when the draft length varies. At most one of the two is set.
    """

    max_batch_size: int
    batch_sizes: list[int]
    max_draft_len: int
    depths: dict[int, int]
    max_concurrency: int | None
    draft_len_schedule: dict[int, int] | None

    @property
    def cuda_graph_batch_sizes(self) -> list[int]:
        """Measured batch sizes up to the maximum, plus 1 and the maximum (graphs to capture)."""
        return sorted({1, self.max_batch_size, *self.batch_sizes, *self.depths})

    def max_num_tokens(self, floor: int) -> int:
        """Tokens per engine step: every sequence verifies 1 + draft tokens; at least ``floor``."""
        return max(floor, self.max_batch_size * (1 + self.max_draft_len))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def serving_plan(profile: DeploymentProfile) -> ServingPlan:
    """The plan for ``profile``: the largest batch size the study measured is the server's limit."""
    measured = speculation_depths(profile)
    batch_sizes = sorted({
        profile.batch_size,
        *(int(r["batch_size"]) for r in profile.per_batch_size if "batch_size" in r),
        *(m.batch_size for m in complete(profile.measurements)),
    })
    max_batch_size = batch_sizes[-1]
    if profile.method == "none":
        return ServingPlan(max_batch_size, batch_sizes, 0, {}, None, None)
    if 1 not in measured:  # engines read the schedule from batch size 1 upward
        measured = {1: measured[min(measured)], **measured}
    depths: dict[int, int] = {}
    running = 0
    for batch_size in sorted(measured, reverse=True):  # suffix maximum, from the largest batch down
        running = max(running, measured[batch_size])
        depths[batch_size] = running
    depths = dict(sorted(depths.items()))
    max_draft_len = depths[1]
    speculative = [b for b, d in depths.items() if d > 0]
    varying = len({depths[b] for b in speculative}) > 1
    turns_off = len(speculative) < len(depths)
    schedule = _up_to_first_zero(depths) if varying else None
    max_concurrency = max(speculative) if turns_off and not varying else None
    return ServingPlan(max_batch_size, batch_sizes, max_draft_len, depths, max_concurrency, schedule)


def _up_to_first_zero(depths: dict[int, int]) -> dict[int, int]:
    """Every measured batch size up to the first zero (later zeros add nothing).

    Releases read the keys differently (older: from this batch size up; newer: up to this batch
    size), but with a key at every measured batch size both give the measured depth there.
    """
    kept: dict[int, int] = {}
    for batch_size, depth in depths.items():
        kept[batch_size] = depth
        if depth == 0:
            break
    return kept


# --- MTP versus draft ------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodSummary:
    """How one speculative method fared across the batch sizes it was measured at."""

    method: str
    batch_sizes: list[int]
    best_depth: dict[int, int]
    speedup: dict[int, float]
    acceptance_rate: dict[int, float]
    acceptance_length: dict[int, float]
    memory_overhead: dict[int, float]  # peak memory over the baseline's at the same batch size, - 1
    geomean_speedup: float | None
    wins: int  # batch sizes where it beats the baseline

    @property
    def speedup_range(self) -> tuple[float, float] | None:
        values = list(self.speedup.values())
        return (min(values), max(values)) if values else None

    @property
    def mean_acceptance_rate(self) -> float | None:
        values = list(self.acceptance_rate.values())
        return sum(values) / len(values) if values else None

    @property
    def mean_memory_overhead(self) -> float | None:
        values = list(self.memory_overhead.values())
        return sum(values) / len(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(speedup_range=self.speedup_range, mean_acceptance_rate=self.mean_acceptance_rate,
                    mean_memory_overhead=self.mean_memory_overhead)
        return data


@dataclass(frozen=True)
class Verdict:
    """MTP versus draft: the per-method summaries and a one-paragraph conclusion."""

    mtp: MethodSummary | None
    draft: MethodSummary | None
    winner: str | None  # "mtp" | "draft" | None (not both measured, or neither beats the baseline)
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "mtp": self.mtp.to_dict() if self.mtp else None,
            "draft": self.draft.to_dict() if self.draft else None,
            "winner": self.winner,
            "text": self.text,
        }


def summarize_method(measurements: Sequence[TrialRow], method: str) -> MethodSummary | None:
    """The method's fastest trial per batch size against the baseline; None if never completed."""
    best = best_by_batch_size(m for m in measurements if m.method == method)
    if not best:
        return None
    base = decision.baselines(measurements)
    speedups = {b: s for b, m in best.items() if (s := speedup(m)) is not None}
    memory = {
        b: m.peak_memory_bytes / base[b].peak_memory_bytes - 1
        for b, m in best.items()
        if m.peak_memory_bytes and b in base and base[b].peak_memory_bytes
    }
    return MethodSummary(
        method=method,
        batch_sizes=list(best),
        best_depth={b: m.depth for b, m in best.items()},
        speedup=speedups,
        acceptance_rate={b: m.acceptance_rate for b, m in best.items() if m.acceptance_rate is not None},
        acceptance_length={b: m.acceptance_length for b, m in best.items() if m.acceptance_length is not None},
        memory_overhead=memory,
        geomean_speedup=_geomean(speedups.values()),
        wins=sum(s > 1 for s in speedups.values()),
    )


def _geomean(values: Iterable[float]) -> float | None:
    logs = [math.log(v) for v in values if v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


def mtp_versus_draft(measurements: Sequence[TrialRow]) -> Verdict:
    """Which integrated (MTP) or assembled (draft model) speculation served this workload better.

    Compared on the geometric-mean speedup over the batch sizes both were measured at; the text
    adds acceptance, memory overhead and how many batch sizes each still beats the baseline.
    """
    mtp, draft = summarize_method(measurements, "mtp"), summarize_method(measurements, "draft")
    if mtp is None and draft is None:
        return Verdict(None, None, None, "Neither MTP nor a draft model was measured in this study.")
    if mtp is None or draft is None:
        only = mtp or draft
        return Verdict(mtp, draft, None, f"Only {_name(only.method)} was measured: {_describe(only)}.")
    if not mtp.speedup and not draft.speedup:
        return Verdict(mtp, draft, None, "No paired speedup was measured (screening figures only: the study ran "
                                         "without its confirmation phase), so MTP and the draft model are not compared.")
    common = sorted(set(mtp.speedup) & set(draft.speedup))
    g_mtp = _geomean(mtp.speedup[b] for b in common)
    g_draft = _geomean(draft.speedup[b] for b in common)
    if g_mtp is None or g_draft is None:
        return Verdict(mtp, draft, None, "MTP and draft were never measured at the same batch size.")
    winner, loser = (mtp, draft) if g_mtp >= g_draft else (draft, mtp)
    g_win, g_lose = max(g_mtp, g_draft), min(g_mtp, g_draft)
    if g_win <= 1:
        return Verdict(mtp, draft, None, (
            f"Neither pays off here: over batch sizes {_span(common)} MTP averages {g_mtp:.2f}x and the "
            f"draft model {g_draft:.2f}x the baseline. {_describe(mtp)}; {_describe(draft)}."
        ))
    text = (
        f"{_name(winner.method)} wins: {g_win:.2f}x versus {g_lose:.2f}x geometric-mean speedup over batch "
        f"sizes {_span(common)}. {_describe(winner)}; {_describe(loser)}."
    )
    return Verdict(mtp, draft, winner.method, text)


def _name(method: str) -> str:
    return {"mtp": "MTP", "draft": "the draft model"}.get(method, method)


def _span(batch_sizes: Sequence[int]) -> str:
    return f"{batch_sizes[0]}-{batch_sizes[-1]}" if len(batch_sizes) > 1 else str(batch_sizes[0])


def _describe(s: MethodSummary) -> str:
    parts = [f"{_name(s.method)}"]
    if s.speedup_range:
        low, high = s.speedup_range
        parts.append(f"speedup {low:.2f}-{high:.2f}x, beats the baseline at {s.wins} of {len(s.speedup)} batch sizes")
    if s.mean_acceptance_rate is not None:
        parts.append(f"acceptance {s.mean_acceptance_rate:.0%}")
    if s.mean_memory_overhead is not None:
        parts.append(f"memory {s.mean_memory_overhead:+.0%} over the baseline")
    return parts[0] + (": " + ", ".join(parts[1:]) if len(parts) > 1 else "")
