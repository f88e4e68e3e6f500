"""Where a study found no speculation (method none) fastest, what a speculative server of one engine
runs there instead, and what that costs against none where the profile measured it.

The meaning of "off" is the engine adapter's (:class:`autotune.analysis.offstate.OffRule`, the
adapter's ``off_rule``): TensorRT-LLM's one-model kinds never run below draft length 1, vLLM's
K = 0 still runs the drafter. At each such concurrency the server runs the fastest measured of draft
length 0 (where the rule allows it) and every measured depth of the profile's method there (a vLLM
study measured depth 4 at 0.89x none where K = 0 gave 0.52x); with nothing measured, 0 where allowed,
else depth 1; then at least the depth of any larger concurrency (the schedule never deepens as
batches grow). Its figure against none comes from the profile's own rows of that configuration
(depth 0 from a row marked ``extra["off_state"]``), and only when they were measured on that engine:
a profile measured on another engine, or predicted by ``autotune plan``, exports its off state
marked unmeasured.

:func:`deployed_schedule` is the serving schedule an engine's writer uses; :func:`off_notes` the comment
lines that say it; :func:`off_state_report` what ``autotune profiles show`` prints per engine.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from autotune.analysis import decision
from autotune.analysis.intervals import Estimate
from autotune.analysis.offstate import OFF_STATE_KEY, OffRule
from autotune.profiles.analysis import ServingSchedule, serving_schedule, series_key, speculation_depths
from autotune.profiles.data import DeploymentProfile
from autotune.serving.speculation import speculative_kind
from autotune.store.results import TrialRow


@dataclass(frozen=True)
class OffState:
    """What ``engine``'s server runs at ``concurrency`` where speculation lost: draft ``depth`` (0:
    the speculative server's own K = 0), measured as ``label`` with ``vs_none`` (its tokens/s over
    none's; None where no baseline row pairs with it), or unmeasured (``label`` None) for ``why``."""

    engine: str
    concurrency: int
    depth: int
    label: str | None
    vs_none: Estimate | None
    why: str | None = None

    @property
    def measured(self) -> bool:
        return self.label is not None

    def text(self) -> str:
        """``"draft length 1: mtp@1 0.87x [0.82, 0.91] vs none (n=5)"`` or ``"draft length 1: unmeasured (...)"``."""
        if not self.measured:
            return f"draft length {self.depth}: unmeasured ({self.why})"
        return f"draft length {self.depth}: {self.label} {speedup_text(self.vs_none)}"

    def to_dict(self) -> dict[str, Any]:
        gain = self.vs_none
        return {"engine": self.engine, "concurrency": self.concurrency, "depth": self.depth, "measured": self.measured,
                "configuration": self.label, "vs_none": gain.to_dict() if gain is not None else None,
                "unmeasured_because": self.why, "summary": self.text()}


def deployed_schedule(profile: DeploymentProfile, rule: OffRule) -> ServingSchedule:
    """:func:`~autotune.profiles.analysis.serving_schedule` as ``rule``'s engine serves it: at each
    concurrency where speculation lost, the draft length :func:`off_states` resolves, kept in ``off_states``."""
    states = off_states(profile, rule)
    if not states:
        return serving_schedule(profile)
    return replace(serving_schedule(profile, {b: state.depth for b, state in states.items()}), off_states=states)


def off_states(profile: DeploymentProfile, rule: OffRule) -> dict[int, OffState]:
    """At each concurrency where the profile's schedule switches speculation off, what ``rule``'s engine
    runs there and its measured cost (module doc); {} where speculation never loses."""
    lost = [b for b, depth in serving_schedule(profile).depths.items() if depth == 0]
    if not lost:
        return {}
    kind = speculative_kind(profile)
    rows, why = _rows_on(profile, rule)
    chosen = {b: _off_depth(rows, b, rule.zero_allowed(kind, _row(rows, b, 0) is not None)) for b in lost}
    # The schedule keeps a depth at least as deep as any larger concurrency's: describe what it serves.
    served = serving_schedule(profile, chosen).depths
    states = {}
    for concurrency in lost:
        depth = served[concurrency]
        row = _row(rows, concurrency, depth)
        if row is None:
            missing = "K = 0 inside the server" if depth == 0 else f"{profile.method}@{depth}"
            states[concurrency] = OffState(rule.engine, concurrency, depth, None, None,
                                          why or f"no row of {missing} at concurrency {concurrency}")
        else:
            label = f"{profile.method}@0 (K = 0 measured)" if depth == 0 else row.config_label
            states[concurrency] = OffState(rule.engine, concurrency, depth, label, _vs_none(row, profile.measurements))
    return states


def _off_depth(rows: list[TrialRow], concurrency: int, zero_allowed: bool) -> int:
    """The draft length to serve at ``concurrency`` where none won: the fastest measured of K = 0
    (where allowed) and every measured depth >= 1; depth 1 where nothing was measured."""
    depths = {row.depth for row in rows if row.concurrency == concurrency and (row.depth > 0 or zero_allowed)}
    fastest = {depth: row.tokens_per_s for depth in depths if (row := _row(rows, concurrency, depth)) is not None}
    if not fastest:
        return 0 if zero_allowed else 1
    return max(fastest, key=lambda depth: (fastest[depth], -depth))


def off_notes(profile: DeploymentProfile, schedule: ServingSchedule, rule: OffRule) -> list[str]:
    """Comment lines for ``rule``'s export: why the server cannot run none where it lost, what it
    runs there with the measured figure (or "unmeasured"), and, where speculation lost at most
    measured concurrency levels, the advice to serve none and route low-load traffic to a speculative pool."""
    if not schedule.off_states:
        return []
    lines = [f"Where none won, what this {rule.title} speculative server runs instead ({rule.source}):"]
    lines += [f"  concurrency {b}: {state.text()}" for b, state in sorted(schedule.off_states.items())]
    return lines + _advice(profile, schedule)


def off_state_report(profile: DeploymentProfile) -> dict[str, list[dict[str, Any]]]:
    """For every engine that serves (an adapter with an ``off_rule``), :func:`off_states` as dicts;
    {} for method none or where speculation never loses."""
    from autotune.engines.registry import ADAPTERS  # the adapters' package imports no engine

    if profile.method == "none":
        return {}
    report = {}
    for adapter in ADAPTERS.values():
        if adapter.off_rule is not None:
            states = off_states(profile, adapter.off_rule)
            if states:
                report[adapter.name] = [state.to_dict() for _, state in sorted(states.items())]
    return report


def speedup_text(gain: Estimate | None) -> str:
    """``"0.87x [0.82, 0.91] vs none (n=5)"``, ``"0.87x vs none (one run)"``, or that none was not paired."""
    if gain is None:
        return "measured, but no none row at that concurrency to compare with"
    if gain.has_interval:
        return f"{gain.value:.2f}x [{gain.low:.2f}, {gain.high:.2f}] vs none (n={gain.n})"
    return f"{gain.value:.2f}x vs none (one run)"


def _rows_on(profile: DeploymentProfile, rule: OffRule) -> tuple[list[TrialRow], str | None]:
    """The profile's complete rows of its own method and draft, when they were measured on ``rule``'s
    engine; else none and why."""
    if profile.details.get("predicted"):
        return [], f"predicted by autotune plan, never measured on {rule.title}"
    if profile.study.engine != rule.engine:
        return [], f"the profile was measured on the {profile.study.engine} engine, not {rule.title}"
    own = (profile.method, profile.draft.fingerprint if profile.draft else None)
    return [row for row in decision.complete(profile.measurements) if series_key(row) == own], None


def _row(rows: list[TrialRow], concurrency: int, depth: int) -> TrialRow | None:
    """The row of ``depth`` at ``concurrency`` (depth 0: one marked as the off state), the latest
    confirmation run's first, then the fastest screening pass."""
    found = [row for row in rows if row.concurrency == concurrency and row.depth == depth
             and bool(row.extra.get(OFF_STATE_KEY)) == (depth == 0)]
    return max(found, key=lambda row: (decision.confirmation_run(row) or 0, row.tokens_per_s), default=None)


def _vs_none(row: TrialRow, measurements: tuple[TrialRow, ...]) -> Estimate | None:
    """The row's paired speedup where stored; else its tokens/s over the baseline's of the same
    phase and run at its concurrency (one run, no interval); None without such a baseline."""
    if row.speedup is not None:
        return decision.speedup_estimate(row)
    run = decision.confirmation_run(row)
    baselines = [m.tokens_per_s for m in decision.complete(measurements) if m.method == decision.BASELINE
                 and m.concurrency == row.concurrency and decision.confirmation_run(m) == run]
    return Estimate.single(row.tokens_per_s / max(baselines)) if baselines else None


def _advice(profile: DeploymentProfile, schedule: ServingSchedule) -> list[str]:
    """Where speculation lost at more than half the measured concurrency levels: serve none, and route
    low-load traffic to a speculative pool, with the figures where it won."""
    measured = speculation_depths(profile)
    lost = [b for b, depth in measured.items() if depth == 0]
    if len(lost) * 2 <= len(measured):
        return []
    table = {int(row["concurrency"]): row for row in profile.per_concurrency if "concurrency" in row}
    won = [f"{b} ({_table_speedup(table.get(b))})" for b, depth in measured.items() if depth > 0]
    return [
        f"Speculation lost to none at {len(lost)} of {len(measured)} measured concurrency levels "
        f"({', '.join(map(str, lost))}): consider serving without speculation (an export of method none) and",
        f"routing low-load traffic to a separate speculative pool; speculation won at concurrency {', '.join(won)}.",
    ]


def _table_speedup(row: dict[str, Any] | None) -> str:
    """``"mtp@2 1.84x [1.79, 1.90]"`` from a per-concurrency table row."""
    if row is None or row.get("speedup") is None:
        return "speedup not measured"
    label = row.get("label") or f"{row['method']}@{row.get('depth')}"
    low, high = row.get("speedup_low"), row.get("speedup_high")
    figure = f"[{low:.2f}, {high:.2f}]" if low is not None and high is not None else "one run"
    return f"{label} {row['speedup']:.2f}x {figure}"
