"""What a study's trials say: the configuration to deploy, the best one at each batch size, and
the verdict on MTP versus draft model versus no speculation on this machine.

Pure functions over stored trial rows (:class:`~autotune.store.results.TrialRow`), so the answer
can be recomputed at any time, while workers are still running.

* Profile: the complete trial with the most tokens/s among those meeting the SLOs (for the pareto
  objective too: the front is reported beside it). When no trial meets the SLOs, the closest one
  (smallest total relative excess, then most tokens/s) is reported with ``slo_met = False``.
* Per batch size: the same choice restricted to each batch size, with the speedup over the
  baseline at that batch size.
* Verdict: per method (and per draft model), its best speedup over all batch sizes, ignoring SLOs
  (it compares methods, not deployments), acceptance, the memory it costs over the baseline, and
  the batch sizes at which it is the fastest.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from autotune.search.objective import Objective, Slo
from autotune.store import results
from autotune.store.results import TrialRow

BASELINE = "none"


@dataclass(frozen=True)
class ProfileChoice:
    """The recommended trial, and whether it meets the SLOs (if not, it is the closest miss)."""

    row: TrialRow
    slo_met: bool
    violation: float  # total relative excess over the SLO limits (0 when met)

    def to_dict(self) -> dict[str, Any]:
        return {**self.row.to_dict(), "slo_met": self.slo_met, "slo_violation": self.violation}


@dataclass(frozen=True)
class BatchSizeBest:
    """The best configuration at one batch size (None fields: nothing complete there yet)."""

    batch_size: int
    baseline_tokens_per_s: float | None
    label: str | None
    method: str | None
    draft: str | None
    depth: int | None
    tokens_per_s: float | None
    speedup: float | None
    acceptance_rate: float | None
    acceptance_length: float | None
    slo_met: bool
    trials: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MethodVerdict:
    """How one method (one draft model, for method draft) fared in the study."""

    name: str  # none | mtp | draft | draft:<label> | ngram
    method: str
    draft: str | None
    trials: int
    best_label: str | None
    best_batch_size: int | None
    best_depth: int | None
    tokens_per_s: float | None
    speedup: float | None
    acceptance_rate: float | None
    acceptance_length: float | None
    memory_overhead_bytes: int | None  # peak memory over the baseline's at the same batch size
    by_batch_size: list[dict[str, Any]] = field(default_factory=list)
    wins_at: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def complete(rows: Iterable[TrialRow]) -> list[TrialRow]:
    return [row for row in rows if row.state == "complete" and row.tokens_per_s is not None]


def _ranked(rows: Sequence[TrialRow], slo: Slo) -> TrialRow | None:
    """Most tokens/s among rows meeting ``slo``; else the smallest violation (ties: most tokens/s)."""
    if not rows:
        return None
    return min(rows, key=lambda row: (slo.violation(row), -row.tokens_per_s, row.trial_number))


def choose_profile(rows: Iterable[TrialRow], objective: Objective) -> ProfileChoice | None:
    """The configuration to deploy (see the module doc), None before any trial completed."""
    best = _ranked(complete(rows), objective.slo)
    if best is None:
        return None
    violation = objective.slo.violation(best)
    return ProfileChoice(best, violation == 0, violation)


def pareto_front(rows: Iterable[TrialRow]) -> list[TrialRow]:
    """Complete trials not dominated in (max tokens/s, min TPOT p50), by descending tokens/s."""
    return results.pareto_front(complete(rows))[::-1]


def baselines(rows: Iterable[TrialRow]) -> dict[int, TrialRow]:
    """The baseline row per batch size: the earliest complete method-none trial."""
    found: dict[int, TrialRow] = {}
    for row in sorted(complete(rows), key=lambda r: r.trial_number):
        if row.method == BASELINE:
            found.setdefault(row.batch_size, row)
    return found


def per_batch_size(rows: Sequence[TrialRow], batch_sizes: Iterable[int], slo: Slo) -> list[BatchSizeBest]:
    """The best configuration at each batch size (under ``slo``), with its speedup."""
    done = complete(rows)
    base = baselines(done)
    table = []
    for batch_size in batch_sizes:
        here = [row for row in done if row.batch_size == batch_size]
        best = _ranked(here, slo)
        baseline = base.get(batch_size)
        table.append(
            BatchSizeBest(
                batch_size=batch_size,
                baseline_tokens_per_s=baseline.tokens_per_s if baseline else None,
                label=best.config_label if best else None,
                method=best.method if best else None,
                draft=best.draft if best else None,
                depth=best.depth if best else None,
                tokens_per_s=best.tokens_per_s if best else None,
                speedup=_speedup(best, baseline),
                acceptance_rate=best.acceptance_rate if best else None,
                acceptance_length=best.acceptance_length if best else None,
                slo_met=best is not None and slo.is_met(best),
                trials=sum(1 for row in rows if row.batch_size == batch_size),
            )
        )
    return table


def _speedup(row: TrialRow | None, baseline: TrialRow | None) -> float | None:
    if row is None or baseline is None or not baseline.tokens_per_s:
        return None
    return row.tokens_per_s / baseline.tokens_per_s


def _method_name(row: TrialRow) -> str:
    if row.method == "draft" and row.draft not in (None, "builtin"):
        return f"draft:{row.draft}"
    return row.method


def method_verdicts(rows: Sequence[TrialRow], method_names: Iterable[str]) -> list[MethodVerdict]:
    """One verdict per method name (``draft:<label>`` for drafts other than the built-in)."""
    done = complete(rows)
    base = baselines(done)
    fastest_at = {b.batch_size: _method_name(b) for b in per_batch_size(done, sorted(base), Slo()) if b.method}
    verdicts = []
    for name in method_names:
        mine = [row for row in done if _method_name(row) == name]
        by_batch = []
        for batch_size in sorted({row.batch_size for row in mine}):
            best = max((row for row in mine if row.batch_size == batch_size), key=lambda row: row.tokens_per_s)
            by_batch.append({
                "batch_size": batch_size, "depth": best.depth, "tokens_per_s": best.tokens_per_s,
                "speedup": _speedup(best, base.get(batch_size)), "acceptance_rate": best.acceptance_rate,
                "acceptance_length": best.acceptance_length,
            })
        top = _best_by_speedup(mine, base)
        baseline = base.get(top.batch_size) if top else None
        overhead = None
        if top is not None and baseline is not None and None not in (top.peak_memory_bytes, baseline.peak_memory_bytes):
            overhead = top.peak_memory_bytes - baseline.peak_memory_bytes
        verdicts.append(
            MethodVerdict(
                name=name, method=name.split(":")[0], draft=mine[0].draft if mine else None,
                trials=sum(1 for row in rows if _method_name(row) == name),
                best_label=top.label if top else None, best_batch_size=top.batch_size if top else None,
                best_depth=top.depth if top else None, tokens_per_s=top.tokens_per_s if top else None,
                speedup=_speedup(top, baseline), acceptance_rate=top.acceptance_rate if top else None,
                acceptance_length=top.acceptance_length if top else None, memory_overhead_bytes=overhead,
                by_batch_size=by_batch, wins_at=sorted(b for b, winner in fastest_at.items() if winner == name),
            )
        )
    return verdicts


def _best_by_speedup(rows: list[TrialRow], base: dict[int, TrialRow]) -> TrialRow | None:
    """The row with the highest speedup over its batch size's baseline (tokens/s without baselines)."""
    measured = [row for row in rows if row.batch_size in base]
    if measured:
        return max(measured, key=lambda row: (_speedup(row, base[row.batch_size]), row.tokens_per_s))
    return max(rows, key=lambda row: row.tokens_per_s, default=None)


def summary_lines(
    profile: ProfileChoice | None, table: list[BatchSizeBest], verdicts: list[MethodVerdict], slo: Slo
) -> list[str]:
    """A few sentences answering 'which method, at which depth and batch size' for this machine."""
    if profile is None:
        return ["No trial has completed yet."]
    limits = ", ".join(f"{name} <= {limit:g}" for name, limit in slo.limits.items())
    row = profile.row
    figure = f"{row.tokens_per_s:.1f} tokens/s" + (f", {row.speedup:.2f}x over none" if row.speedup else "")
    if not limits:
        lines = [f"Best configuration: {row.label} ({figure})."]
    elif profile.slo_met:
        lines = [f"Best configuration meeting {limits}: {row.label} ({figure})."]
    else:
        measured = ", ".join(f"{name} = {getattr(row, name):.1f}" for name in slo.limits if getattr(row, name) is not None)
        lines = [f"No configuration meets {limits}; the closest is {row.label} ({measured}; {figure})."]
    for verdict in verdicts:
        if verdict.method == BASELINE or verdict.speedup is None:
            continue
        acceptance = f", acceptance {verdict.acceptance_rate:.0%}" if verdict.acceptance_rate is not None else ""
        memory = (f", {verdict.memory_overhead_bytes / 2**20:+.1f} MiB"
                  if verdict.memory_overhead_bytes is not None else "")
        lines.append(f"{verdict.name}: best {verdict.speedup:.2f}x ({verdict.best_label}{acceptance}{memory}).")
    winners = [(b.batch_size, b.label, b.speedup) for b in table if b.label is not None]
    if winners:
        lines.append("Fastest by batch size: " + "; ".join(
            f"b{batch} {label}" + (f" {speedup:.2f}x" if speedup and label != BASELINE else "")
            for batch, label, speedup in winners
        ) + ".")
    return lines
