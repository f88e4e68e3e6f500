"""The study report: PNG plots and one self-contained HTML page (the PNGs embedded as data URIs).

Plots: throughput against concurrency per method; speedup against depth per method at each
concurrency; acceptance per draft position; the throughput/TPOT Pareto front with the chosen profile
marked; each method's best speedup per concurrency; when the performance model predicted
trials before they ran, predicted against measured tokens/s; and, when the profile was served by
``autotune validate``, its newest validation's tok/s and TPOT against concurrency (schedule, best
fixed depth and none, with their intervals over the runs). The page adds the per-method verdict
(:func:`autotune.analysis.decision.method_verdicts`, in the words the tuner's summary uses), the
per-concurrency table and every trial (with its prediction, where one was made).

Every figure is read from the rows that decide (:func:`autotune.analysis.decision.deciding_rows`:
the latest confirmation run, or the screening trials without one). Confirmation rows carry 95 %
intervals, drawn as error bars and written as ``±`` / ``[low, high]`` with their n; a speedup is
only ever the stored, paired one (:func:`~autotune.analysis.decision.speedup_estimate`), so a
study that was only screened has no speedup plots.

The modules, by layer: :mod:`~autotune.report.study` (what is read from the database),
:mod:`~autotune.report.plots` (matplotlib), :mod:`~autotune.report.page` (HTML) and
:mod:`~autotune.report.build` (the two put together, as files or as text).
"""

from autotune.report.build import REPORT_FILE, report_html, write_report
from autotune.report.page import NO_SPEEDUPS, PLOT_CAPTIONS, render_html
from autotune.report.plots import error_bars, figures, plot_pngs
from autotune.report.study import StudyData, has_intervals, load_study, method_verdicts

__all__ = [
    "NO_SPEEDUPS", "PLOT_CAPTIONS", "REPORT_FILE", "StudyData", "error_bars", "figures", "has_intervals",
    "load_study", "method_verdicts", "plot_pngs", "render_html", "report_html", "write_report",
]
