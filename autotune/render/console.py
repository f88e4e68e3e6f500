"""The consoles and the one table printer every command's output goes through: rich, with no
markup, fitted to the terminal."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from autotune.render.formats import format_value

GIB = 1024**3
# No markup nor emoji codes on any console: names come from users and imported profiles, and "[/]"
# or "[red]" in one was a rich MarkupError (an internal error) or restyled a table; style= is used.
PLAIN = {"markup": False, "emoji": False}
WIDEST = 10_000  # columns a table is measured in: wider than any table's natural width


def stdout(width: int | None = None) -> Console:
    """A console on stdout, ``width`` columns wide (None: the terminal's, or $COLUMNS, or 80)."""
    # A fresh console each time so the CLI's captured stdout (tests, pipes) is honoured.
    return Console(highlight=False, soft_wrap=True, width=width, **PLAIN)


@contextmanager
def status_spinner(enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr; yields a callback that updates its text (a no-op when disabled)."""
    console = Console(stderr=True, **PLAIN)
    if not enabled or not console.is_terminal:
        yield lambda _message: None
        return
    with console.status("starting") as status:
        yield lambda message: status.update(message)


def print_rows(rows: list[dict], columns: list[str], title: str | None = None, no_wrap: Collection[str] = (),
               compact: bool = False, optional: Sequence[str] = (), wide: bool = False) -> None:
    """A table of the given columns of ``rows`` (dicts); floats shortened.

    It fits the terminal (80 columns when not a terminal, or $COLUMNS): the ``optional`` columns are
    left out, in that order, while the table cannot fit without breaking a word of a cell; headers are
    never cut and a word longer than its column folds onto the next line rather than losing its end.
    The ``no_wrap`` columns keep their width where that still fits. ``compact`` shares the padding
    between neighbouring cells. ``wide``: every column, at its natural width, whatever the terminal's."""
    console = stdout()
    shown = list(columns)
    table = _table(rows, shown, title, no_wrap, compact)
    if wide:
        stdout(max(console.width, _measure(console, table).maximum)).print(table)
        return
    for column in [c for c in optional if c in shown]:
        if _fits(console, table):
            break
        shown.remove(column)
        table = _table(rows, shown, title, no_wrap, compact)
    if no_wrap and not _fits(console, table):
        table = _table(rows, shown, title, (), compact)  # unwrapped cells would cut the headers
    console.print(table)


def _table(rows: list[dict], columns: list[str], title: str | None, no_wrap: Collection[str], compact: bool) -> Table:
    table = Table(title=title, collapse_padding=compact)
    for column in columns:
        table.add_column(column, no_wrap=column in no_wrap, overflow="fold", min_width=len(column))
    for row in rows:
        table.add_row(*[format_value(v) if isinstance(v, float) else ("-" if v is None else str(v))
                        for v in (row.get(c) for c in columns)])
    return table


def _fits(console: Console, table: Table) -> bool:
    """Whether ``table`` renders within the console's width without breaking a word of a cell."""
    if _measure(console, table).minimum > console.width:
        return False
    with console.capture() as capture:
        console.print(table)
    return max(map(len, capture.get().splitlines()), default=0) <= console.width


def _measure(console: Console, table: Table) -> Measurement:
    return Measurement.get(console, console.options.update(width=WIDEST), table)


def print_lines(lines: list[str]) -> None:
    """Plain lines, e.g. a tuning summary."""
    console = stdout()
    for line in lines:
        console.print(line)
