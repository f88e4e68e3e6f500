"""The study report assembled from its layers (:mod:`~autotune.report.study`,
:mod:`~autotune.report.plots`, :mod:`~autotune.report.page`): written as files, or as one page."""

from __future__ import annotations

from pathlib import Path

from autotune.profiles.files import write_atomic
from autotune.report.page import render_html
from autotune.report.plots import plot_pngs
from autotune.report.study import load_study

REPORT_FILE = "report.html"


def write_report(db_url: str | None, study: str | int, out_dir: Path | str) -> Path:
    """Write the PNG plots and ``report.html`` (plots embedded) for ``study`` into ``out_dir``,
    replacing an earlier report there. Returns the HTML path."""
    data = load_study(db_url, study)
    out_dir = Path(out_dir)
    pngs = plot_pngs(data)
    for name, png in pngs.items():
        write_atomic(out_dir / f"{name}.png", png, force=True)
    return write_atomic(out_dir / REPORT_FILE, render_html(data, pngs), force=True)


def report_html(db_url: str | None, study: str | int) -> str:
    """The page :func:`write_report` writes for ``study``, as text: it embeds its plots, so it
    stands alone. Its links name each PNG by its file name alone, which ``autotune serve`` answers
    next to the report's URL (``/v1/studies/NAME/PLOT.png``)."""
    data = load_study(db_url, study)
    return render_html(data, plot_pngs(data))

