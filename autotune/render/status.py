"""``autotune probe`` and ``autotune db``: the machine's measured figures, the database's revision."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from autotune.render.console import GIB, stdout
from autotune.render.formats import format_value

if TYPE_CHECKING:
    from autotune.store import SchemaStatus

def print_probe(result) -> None:  # noqa: ANN001 - autotune.api.ProbeResult (render sits below api)
    """The probe's facts and a metric table: measured, theoretical peak, ratio."""
    profile = result.profile
    console = stdout()
    console.print(profile.name, style="bold")
    # Two lines rather than one: each fits an 80-column terminal.
    console.print(f"fingerprint {profile.fingerprint}  ·  {profile.device_type} x{profile.device_count}  ·  "
                  f"memory {profile.memory_total_bytes / GIB:.1f} GiB")
    console.print(f"probe method v{profile.method_version}{' (quick)' if profile.quick else ''}  ·  "
                  f"{profile.duration_s:.1f} s")
    table = Table(title="Measured vs. theoretical peak")
    table.add_column("metric")
    table.add_column("unit")
    table.add_column("measured", justify="right")
    table.add_column("peak", justify="right")
    table.add_column("ratio", justify="right")
    for metric in profile.metrics:
        ratio = f"{metric.ratio:.0%}" if metric.ratio is not None else "-"
        table.add_row(metric.name, metric.unit, format_value(metric.measured),
                      format_value(metric.peak), ratio)
    console.print(table)
    for note in profile.spec.get("notes", []):
        console.print(f"note: {note}")
    if result.probe_id is not None:
        console.print(f"stored as probe {result.probe_id} of hardware {result.hardware_id} in {result.database}")
    else:
        console.print("not stored (--no-store)")


def print_schema_status(status: SchemaStatus) -> None:
    """One line: the database, its revision, and whether that is the newest."""
    if status.current is None:
        state = "empty (no autotune tables)"
    elif not status.known:
        state = "unknown revision (written by a newer autotune)"
    elif status.is_head:
        state = "at head"
    else:
        state = f"behind head {status.head}: run `autotune db upgrade`"
    stdout().print(f"{status.url}: revision {status.current or '-'} ({state})")
