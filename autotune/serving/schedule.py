"""The per-concurrency schedule in words, shared by every engine's export: the study's table as
comment lines, and what an engine without a per-concurrency switch cannot express. Each engine's
own schedule field is written by that engine's writer."""

from __future__ import annotations

from typing import Any

from autotune.profiles.analysis import ServingSchedule
from autotune.profiles.data import DeploymentProfile


def schedule_notes(profile: DeploymentProfile) -> list[str]:
    """One line per concurrency of the study's table: the depth to serve (0: speculation off),
    the configuration it comes from and its speedup with the 95 % interval where measured."""
    rows = [row for row in profile.per_concurrency if row.get("method") is not None]
    if not rows:
        return []
    if profile.details.get("predicted"):
        return ["Predicted per concurrency (depth to serve; predicted speedup vs none), not measured:"] + [
            f"  concurrency {row['concurrency']}: depth {_depth(row)} ({_table_label(row)}"
            + (f", predicted {row['speedup']:.2f}x" if row.get("speedup") is not None else "") + ")"
            for row in sorted(rows, key=lambda r: int(r["concurrency"]))]
    lines = ["Measured per concurrency (depth to serve; speedup vs none, 95 % interval where confirmed):"]
    for row in sorted(rows, key=lambda r: int(r["concurrency"])):
        lines.append(f"  concurrency {row['concurrency']}: depth {_depth(row)} ({_table_label(row)}{_row_speedup(row)})"
                     + (f" - {row['note']}" if row.get("note") else ""))
    return lines


def unscheduled_notes(schedule: ServingSchedule, engine: str, predicted: bool = False) -> list[str]:
    """What ``engine`` cannot express: speculation switched off or shortened by concurrency."""
    if schedule.max_concurrency is None and schedule.draft_len_schedule is None:
        return []
    measured = ", ".join(f"{b}: {d}" for b, d in schedule.depths.items())
    return [
        f"{engine} speculates at every concurrency with the same draft length; autotune "
        f"{'predicted' if predicted else 'measured'} the best",
        f"draft length per concurrency as {{{measured}}} (0: speculation did not beat none).",
        "Cap the concurrency or run separate servers if the load sits where the draft length drops.",
    ]


def _depth(row: dict[str, Any]) -> int:
    return 0 if row.get("method") == "none" else int(row.get("depth") or 0)


def _table_label(row: dict[str, Any]) -> str:
    if row.get("label"):
        return str(row["label"])
    return row["method"] if row["method"] == "none" else f"{row['method']}@{row.get('depth')}"


def _row_speedup(row: dict[str, Any]) -> str:
    """``", 1.84x [1.79, 1.90], n=7"``, ``", 1.84x, one run"``; for the baseline, whether
    speculation was beaten; nothing when no speedup was stored."""
    n = row.get("repetitions") or 1
    tied = [label for label in row.get("tied") or [] if label != _table_label(row)]
    if row.get("method") == "none":
        if tied:
            return f", speculation ({', '.join(tied)}) did not clear 1.0x at 95 %"
        return ", no speculation measured faster" if row.get("confirmed") or n > 1 else ", one screening run"
    value, low, high = row.get("speedup"), row.get("speedup_low"), row.get("speedup_high")
    if value is None:
        return ", one screening run, no speedup measured" if not row.get("confirmed") else ""
    within = f"; within noise of {', '.join(tied)}" if tied else ""
    if low is not None and high is not None:
        return f", {value:.2f}x [{low:.2f}, {high:.2f}], n={n}{within}"
    return f", {value:.2f}x, one run{within}"
