"""The three servers a validation runs side by side, as ``vllm serve`` scripts written by the vLLM
serving writer (:mod:`autotune.serving.vllm`):

* ``schedule``: the profile's export, byte for byte what ``autotune export --format vllm`` writes
  (its per-concurrency schedule, K = 0 where a row measured it);
* ``fixed``: the profile's method at its best single depth, the same at every concurrency;
* ``none``: the same server limits without speculation.

The best single depth is the depth of the profile's own method (and draft) whose deciding rows (the
latest confirmation's where one ran, else the screening passes) have the highest geometric mean of
tokens/s relative to the fastest at each concurrency. Only the depths measured at the most concurrency levels
are compared, over the concurrency levels they share: a depth the search measured at one concurrency alone
(say past --max-depth) would otherwise shrink the comparison to that concurrency. The profile's own
depth where its rows cannot say.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace

from autotune.analysis import decision
from autotune.engines.vllm.mapping import VLLM_OFF_RULE
from autotune.profiles.analysis import ServingSchedule, series_key
from autotune.profiles.data import DeploymentProfile
from autotune.serving import export_profile
from autotune.serving.off_depths import deployed_schedule
from autotune.serving.vllm import vllm_script

SCHEDULE, FIXED, NONE = "schedule", "fixed", "none"
SERVERS = (SCHEDULE, FIXED, NONE)


@dataclass(frozen=True)
class ServerVariant:
    """One server to run: ``name`` (one of :data:`SERVERS`), what it serves (``label``, e.g. ``draft@2``
    or ``draft schedule c1:2, c2:1``), the script's text, and its draft length at every concurrency
    (``depth``: 0 for none; None for the schedule, whose depth depends on the batch: :func:`schedule_depth`)."""

    name: str
    label: str
    script: str
    depth: int | None


def server_variants(profile: DeploymentProfile) -> list[ServerVariant]:
    """The schedule, fixed-depth and none servers of a speculative ``profile``, in that order; a
    profile of method none has the none server only (there is nothing else to compare)."""
    schedule = deployed_schedule(profile, VLLM_OFF_RULE)
    none_profile = replace(profile, method="none", depth=0, draft=None)
    none = ServerVariant(NONE, "none", vllm_script(none_profile, _none_schedule(schedule)), 0)
    if profile.method == "none":
        return [none]
    depths = sorted(set(schedule.depths.values()), reverse=True)
    schedule_label = f"{profile.method}@{depths[0]}" if len(depths) == 1 else \
        f"{profile.method} schedule " + ", ".join(f"c{b}:{d}" for b, d in sorted(schedule.depths.items()))
    depth = best_fixed_depth(profile)
    return [
        ServerVariant(SCHEDULE, schedule_label, export_profile(profile, "vllm"), None),
        ServerVariant(FIXED, f"{profile.method}@{depth}", vllm_script(profile, fixed_schedule(schedule, depth)), depth),
        none,
    ]


def schedule_depth(schedule: ServingSchedule, concurrency: int) -> int:
    """The draft length the schedule server runs with ``concurrency`` requests in flight: the schedule's
    depth at the largest concurrency it lists up to ``concurrency`` (each holds up to the next one,
    as the export writes its ranges: autotune/serving/vllm.py ``vllm_batch_schedule``)."""
    listed = [b for b in schedule.depths if b <= concurrency] or [min(schedule.depths)]
    return schedule.depths[max(listed)]


def fixed_schedule(schedule: ServingSchedule, depth: int) -> ServingSchedule:
    """``schedule``'s server limits with draft length ``depth`` at every concurrency."""
    return ServingSchedule(schedule.max_batch_size, schedule.concurrencies, depth, {1: depth}, None, None)


def _none_schedule(schedule: ServingSchedule) -> ServingSchedule:
    return ServingSchedule(schedule.max_batch_size, schedule.concurrencies, 0, {}, None, None)


def best_fixed_depth(profile: DeploymentProfile) -> int:
    """The single depth of the profile's method that is fastest across its concurrency levels (module doc)."""
    own = (profile.method, profile.draft.fingerprint if profile.draft else None)
    by_depth: dict[int, dict[int, float]] = defaultdict(dict)
    for row in decision.deciding_rows(profile.measurements):
        if series_key(row) == own and row.depth > 0:
            rates = by_depth[row.depth]
            rates[row.concurrency] = max(rates.get(row.concurrency, 0.0), row.tokens_per_s)
    # A depth measured at one concurrency (a point the search explored past --max-depth) says
    # nothing about the others: compare only the depths measured at the most concurrency levels.
    widest = max((len(rates) for rates in by_depth.values()), default=0)
    compared = {depth: rates for depth, rates in by_depth.items() if len(rates) == widest}
    shared = set.intersection(*(set(rates) for rates in compared.values())) if compared else set()
    if not shared:
        return profile.depth
    fastest = {b: max(rates[b] for rates in compared.values()) for b in shared}

    def score(depth: int) -> tuple[float, int]:
        relative = [math.log(compared[depth][b] / fastest[b]) for b in shared]
        return (sum(relative) / len(relative), -depth)  # a tie goes to the smaller depth

    return max(compared, key=score)
