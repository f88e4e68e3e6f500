"""Reading a profile's trials: the best configuration per concurrency and the serving schedule derived
from it (the verdict per method and the Pareto front are :mod:`autotune.analysis.decision`'s).
Pure functions over profile dataclasses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
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


def best_by_concurrency(measurements: Iterable[TrialRow]) -> dict[int, TrialRow]:
    """The deciding row with the most tokens/s at each concurrency, by ascending concurrency."""
    return decision.best_by_concurrency(complete(measurements))


def speculation_depths(profile: DeploymentProfile) -> dict[int, int]:
    """Draft tokens per step the profile's method should use at each measured concurrency
    (0: speculation off there), by ascending concurrency.

    From the profile's per-concurrency table: its depth where the winner is the profile's method,
    0 where the winner is method none; at concurrency levels another speculative method won, from the
    profile's own method's fastest trial (0 if the baseline beats it). Without a table, from the
    trials alone. The profile's own concurrency always gets the profile's depth.
    """
    if profile.method == "none":
        return {}
    own = [m for m in complete(profile.measurements) if series_key(m) == (profile.method, _fingerprint(profile))]
    own_best = best_by_concurrency(own)
    depths: dict[int, int] = {}
    rows = {int(r["concurrency"]): r for r in profile.per_concurrency if "concurrency" in r}
    for concurrency in sorted(rows) if rows else sorted(own_best):
        row = rows.get(concurrency)
        if row is not None and row.get("method") == profile.method and _same_draft(row, profile):
            depths[concurrency] = int(row["depth"])
        elif row is not None and row.get("method") == "none":
            depths[concurrency] = 0
        elif concurrency in own_best:
            m = own_best[concurrency]
            gain = decision.speedup_estimate(m)
            wins = gain is not None and gain.low is not None and gain.low > 1  # clears 1.0x at 95 %
            depths[concurrency] = m.depth if wins else 0
    depths[profile.concurrency] = profile.depth
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
class ServingSchedule:
    """Batch limits and speculation schedule for a serving engine.

    ``concurrencies``: every concurrency the study measured (any method). ``depths``: draft length per concurrency, made non-increasing (a depth measured best at a larger
    batch is kept for the smaller ones: serving engines require every scheduled draft length to be
    <= the batch-1 one, and the profile's own depth must survive). ``max_concurrency``: speculation
    off above this concurrency (when the draft length is otherwise constant); ``draft_len_schedule``:
    when the draft length varies. At most one of the two is set. ``off_states``: for a schedule written
    for one engine (:func:`autotune.serving.off_depths.deployed_schedule`), what its server runs at each
    concurrency where speculation lost (:class:`autotune.serving.off_depths.OffState` by concurrency).
    """

    max_batch_size: int
    concurrencies: list[int]
    max_draft_len: int
    depths: dict[int, int]
    max_concurrency: int | None
    draft_len_schedule: dict[int, int] | None
    off_states: dict[int, Any] = field(default_factory=dict)

    @property
    def cuda_graph_batch_sizes(self) -> list[int]:
        """Measured concurrency levels up to the maximum, plus 1 and the maximum (graphs to capture)."""
        return sorted({1, self.max_batch_size, *self.concurrencies, *self.depths})

    def max_num_tokens(self, floor: int) -> int:
        """Tokens per engine step: every sequence verifies 1 + draft tokens; at least ``floor``."""
        return max(floor, self.max_batch_size * (1 + self.max_draft_len))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def serving_schedule(profile: DeploymentProfile, served: Mapping[int, int] | None = None) -> ServingSchedule:
    """The schedule for ``profile``: the largest concurrency the study measured is the server's limit.
    ``served``: concurrency -> the draft length an engine's server runs where speculation lost
    (instead of 0; :func:`autotune.serving.off_depths.deployed_schedule`)."""
    measured = {**speculation_depths(profile), **(served or {})}
    concurrencies = sorted({
        profile.concurrency,
        *(int(r["concurrency"]) for r in profile.per_concurrency if "concurrency" in r),
        *(m.concurrency for m in complete(profile.measurements)),
    })
    max_batch_size = concurrencies[-1]
    if profile.method == "none":
        return ServingSchedule(max_batch_size, concurrencies, 0, {}, None, None)
    if 1 not in measured:  # engines read the schedule from concurrency 1 upward
        measured = {1: measured[min(measured)], **measured}
    depths: dict[int, int] = {}
    running = 0
    for concurrency in sorted(measured, reverse=True):  # suffix maximum, from the largest batch down
        running = max(running, measured[concurrency])
        depths[concurrency] = running
    depths = dict(sorted(depths.items()))
    max_draft_len = depths[1]
    speculative = [b for b, d in depths.items() if d > 0]
    varying = len({depths[b] for b in speculative}) > 1
    turns_off = len(speculative) < len(depths)
    schedule = _up_to_first_zero(depths) if varying else None
    max_concurrency = max(speculative) if turns_off and not varying else None
    return ServingSchedule(max_batch_size, concurrencies, max_draft_len, depths, max_concurrency, schedule)


def _up_to_first_zero(depths: dict[int, int]) -> dict[int, int]:
    """Every measured concurrency up to the first zero (later zeros add nothing).

    Releases read the keys differently (older: from this concurrency up; newer: up to this
    concurrency), but with a key at every measured concurrency both give the measured depth there.
    """
    kept: dict[int, int] = {}
    for concurrency, depth in depths.items():
        kept[concurrency] = depth
        if depth == 0:
            break
    return kept
