"""Human-readable output: rich tables and spinners for the CLI's results (no click here)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from autotune.api import ProbeResult
    from autotune.store import SchemaStatus

GIB = 1024**3


def stdout() -> Console:
    # A fresh console each time so the CLI's captured stdout (tests, pipes) is honoured.
    return Console(highlight=False, soft_wrap=True)


@contextmanager
def status_spinner(enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr; yields a callback that updates its text (a no-op when disabled)."""
    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield lambda _message: None
        return
    with console.status("starting") as status:
        yield lambda message: status.update(message)


def format_value(value: float | None, digits: int = 3) -> str:
    """A number with sensible significant digits, or '-' when unknown."""
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def print_probe(result: ProbeResult) -> None:
    """The probe's facts and a metric table: measured, theoretical peak, ratio."""
    profile = result.profile
    console = stdout()
    console.print(f"[bold]{profile.name}[/bold]")
    console.print(
        f"fingerprint {profile.fingerprint}  ·  {profile.device_type} x{profile.device_count}  ·  "
        f"memory {profile.memory_total_bytes / GIB:.1f} GiB  ·  probe method v{profile.method_version}"
        f"{' (quick)' if profile.quick else ''}  ·  {profile.duration_s:.1f} s"
    )
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
