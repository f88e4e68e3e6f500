"""A study's decision in words: the few sentences of the tuner's summary and the report's verdict
per method, every figure with its interval or marked as one unconfirmed run (the decisions
themselves: :mod:`autotune.analysis.decision`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from autotune.analysis.decision import (
    BASELINE,
    ConcurrencyBest,
    MethodVerdict,
    ProfileChoice,
    row_label,
    speedup_estimate,
)


def summary_lines(profile: ProfileChoice | None, table: list[ConcurrencyBest], verdicts: list[MethodVerdict],
                  slo: Any) -> list[str]:
    """A few sentences answering 'which method, at which depth and concurrency' for this machine,
    every figure with its interval (or marked as one unconfirmed run)."""
    if profile is None:
        return ["No trial has completed yet."]
    limits = ", ".join(f"{name} <= {limit:g}" for name, limit in slo.limits.items())
    row = profile.row
    figure = _figure(row)
    label = row_label(row)
    if not limits:
        lines = [f"Recommended: {label} ({figure})."]
    elif profile.slo_met:
        lines = [f"Recommended, meeting {limits}: {label} ({figure})."]
    else:
        measured = ", ".join(f"{name} = {getattr(row, name):.1f}" for name in slo.limits if getattr(row, name) is not None)
        lines = [f"No configuration meets {limits}; the closest is {label} ({measured}; {figure})."]
    if profile.decision is not None:
        sentence = profile.decision.tie_sentence()
        if sentence:
            lines.append(sentence[0].upper() + sentence[1:] + ".")
        if not profile.decision.confirmed:
            lines.append("These are screening figures (one run each, no interval): the confirmation phase did not run.")
    lines += verdict_lines(verdicts)
    schedule = [b for b in table if b.label is not None]
    if schedule:
        lines.append("Schedule by concurrency: " + "; ".join(
            f"c{b.concurrency} {b.label}" + (f" {_speedup_text(b.speedup, b.speedup_low, b.speedup_high)}"
                                            if b.speedup is not None and b.method != BASELINE else "")
            + (f" ({b.note})" if b.note else "")
            for b in schedule
        ) + ".")
    return lines


def verdict_lines(verdicts: Iterable[MethodVerdict]) -> list[str]:
    """A sentence per speculative method that completed a trial: its best speedup with its
    interval (or its best screened tokens/s, one run, when it never reached the confirmation),
    acceptance and memory over the baseline; the study summary and the report both say these."""
    lines = []
    for verdict in verdicts:
        if verdict.method == BASELINE or verdict.best_label is None:
            continue
        acceptance = f", acceptance {verdict.acceptance_rate:.0%}" if verdict.acceptance_rate is not None else ""
        memory = (f", {verdict.memory_overhead_bytes / 2**20:+.1f} MiB"
                  if verdict.memory_overhead_bytes is not None else "")
        if verdict.speedup is not None:
            lines.append(f"{verdict.name}: best {_speedup_text(verdict.speedup, verdict.speedup_low, verdict.speedup_high)} "
                         f"({verdict.best_label}{acceptance}{memory}).")
        else:
            lines.append(f"{verdict.name}: not among the finalists; best screened {verdict.best_label} at "
                         f"{verdict.tokens_per_s:.1f} tokens/s (one run){acceptance}.")
    return lines


def _speedup_text(value: float, low: float | None, high: float | None) -> str:
    return f"{value:.2f}x" + (f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else " (one run)")


def _figure(row: Any) -> str:
    tokens = row.estimate("tokens_per_s")
    width = tokens.relative_half_width
    text = f"{row.tokens_per_s:.1f} tokens/s" + (f" ±{width:.1%}, n={tokens.n}" if width is not None else ", one run")
    speedup = speedup_estimate(row)
    if speedup is not None and row.method != BASELINE:
        text += f", {_speedup_text(speedup.value, speedup.low, speedup.high)} over none"
    return text
