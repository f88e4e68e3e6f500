"""A study's plots over HTTP: the figures ``autotune report`` draws, each as a PNG at
``/v1/studies/{name}/{plot}.png`` (next to the served report, whose links name the files alone) and
listed with their captions at ``/v1/studies/{name}/plots`` for the page.

Drawing a study's figures takes about a second of CPU, and a page asks for all of them at once: the
PNGs are drawn once per version of the study's data (a digest of what the report reads, so a new
trial makes a new version) and kept for the last :data:`KEPT_STUDIES` studies asked.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import quote

from autotune import report

KEPT_STUDIES = 8


@dataclass(frozen=True)
class Plots:
    """One version of a study's plots: PNG bytes by plot name, and whether they draw intervals."""

    study: str
    version: str
    pngs: dict[str, bytes]
    intervals: bool

    def listing(self) -> dict:
        """What ``/v1/studies/{name}/plots`` answers: each plot's caption (it says what its error
        bars are) and URL, the URL naming this version so that a browser fetches a changed plot."""
        base = f"/v1/studies/{quote(self.study, safe='')}"
        return {"study": self.study, "version": self.version, "intervals": self.intervals,
                "note": None if self.intervals else report.NO_SPEEDUPS,
                "plots": [{"name": name, "caption": report.PLOT_CAPTIONS.get(name, name),
                           "url": f"{base}/{name}.png?version={self.version}"} for name in self.pngs]}


class StudyPlots:
    """The plots of the studies asked lately, each version drawn once (see the module doc). Routes
    call it from the thread pool: one study is drawn at a time, and a request for a version being
    drawn waits for it rather than drawing it again."""

    def __init__(self, db_url: str | None, kept: int = KEPT_STUDIES) -> None:
        self.db_url = db_url
        self.kept = kept
        self._plots: OrderedDict[str, Plots] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, study: str) -> Plots:
        """The plots of ``study`` as its data stands now (NotFoundError for an unknown study)."""
        data = report.load_study(self.db_url, study)
        version = hashlib.sha256(repr(data).encode("utf-8")).hexdigest()[:16]
        with self._lock:
            plots = self._plots.get(study)
            if plots is None or plots.version != version:
                plots = Plots(study, version, report.plot_pngs(data), report.has_intervals(data))
                self._plots[study] = plots
            self._plots.move_to_end(study)
            while len(self._plots) > self.kept:
                self._plots.popitem(last=False)
            return plots
