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

matplotlib is used through its object API on the Agg canvas: no pyplot, no global backend switch,
nothing needs a display.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autotune import __version__
from autotune.analysis import decision, prediction
from autotune.analysis.decision import pareto_front
from autotune.analysis.intervals import Estimate
from autotune.errors import ProfileNotFoundError
from autotune.profiles import analysis, records
from autotune.profiles.data import DeploymentProfile, HardwareInfo, ModelInfo, StudyInfo, utc_iso
from autotune.profiles.files import write_atomic
from autotune.render import format_error, format_estimate, format_speedup
from autotune.store import open_database, profile_queries
from autotune.store.results import TrialRow, trial_row

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from autotune.validation.results import ValidationResult

REPORT_FILE = "report.html"
METHOD_COLORS = {"none": "#6b6b6b", "mtp": "#1f77b4", "ngram": "#2ca02c"}
DRAFT_COLORS = ("#ff7f0e", "#d62728", "#9467bd", "#8c564b")
METHOD_NAMES = {"none": "none (baseline)", "mtp": "MTP", "draft": "draft model", "ngram": "n-gram"}
DPI = 110


@dataclass(frozen=True)
class StudyData:
    """What the report reads: the study, its machine and models, every trial, and its profile."""

    study: StudyInfo
    hardware: HardwareInfo
    target: ModelInfo
    measurements: tuple[TrialRow, ...]
    draft_models: tuple[ModelInfo, ...]
    profile: DeploymentProfile | None
    validations: tuple[ValidationResult, ...] = ()  # the profile's, newest first (autotune validate)

    def series_name(self, key: analysis.SeriesKey) -> str:
        method, draft = key
        if method != "draft":
            return METHOD_NAMES[method]
        model = next((m for m in self.draft_models if m.fingerprint == draft), None)
        return f"draft model ({model.name if model else draft})"

    def series_legend(self, key: analysis.SeriesKey) -> str:
        """:meth:`series_name` for a plot: a draft's name is shown as written, never read as
        matplotlib mathtext (``$...$``, where a stray backslash command would fail the drawing)."""
        return self.series_name(key).replace("$", r"\$")

    def series_color(self, key: analysis.SeriesKey) -> str:
        method, draft = key
        if method != "draft":
            return METHOD_COLORS[method]
        drafts = sorted(m.fingerprint for m in self.draft_models)
        return DRAFT_COLORS[drafts.index(draft) % len(DRAFT_COLORS)] if draft in drafts else DRAFT_COLORS[0]


def load_study(db_url: str | None, study: str | int) -> StudyData:
    """The report's data for the study named ``study`` (or with that id)."""
    with open_database(db_url) as database, database.session() as session:
        record = profile_queries.find_study(session, study)
        if record is None:
            names = ", ".join(profile_queries.study_names(session)) or "none"
            raise ProfileNotFoundError(f"no study {study!r} is stored (newest: {names})")
        rows = profile_queries.study_measurements(session, record.id)
        # Loaded first, so that each row's draft is found in the session, not queried row by row.
        drafts = profile_queries.models_by_id(session, {r.draft_model_id for r in rows if r.draft_model_id})
        profile_record = profile_queries.latest_profile_of_study(session, record.id)
        validations = _validations(session, profile_record.id) if profile_record else ()
        return StudyData(
            study=records.study_info(record),
            hardware=records.hardware_info(record.hardware),
            target=records.model_info(record.target_model),
            measurements=tuple(trial_row(r) for r in rows),
            draft_models=tuple(records.model_info(m) for m in drafts.values()),
            profile=records.deployment_profile(session, profile_record) if profile_record else None,
            validations=validations,
        )


def _validations(session, profile_id: int) -> tuple[ValidationResult, ...]:  # noqa: ANN001 - a Session
    from dataclasses import replace

    from autotune.store.validations import profile_validations
    from autotune.validation.results import ValidationResult

    return tuple(replace(ValidationResult.from_dict(r.result), id=r.id, profile_id=r.profile_id)
                 for r in profile_validations(session, profile_id))


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


def plot_pngs(data: StudyData) -> dict[str, bytes]:
    """The report's plots as PNG files' bytes, by file stem (what :func:`write_report` writes, and
    the service serves where the served report links them)."""
    return {name: _png(figure) for name, figure in figures(data).items()}


def has_intervals(data: StudyData) -> bool:
    """Whether the figures draw 95 % intervals: the rows that decide come from a confirmation run (a
    study only screened has one run per configuration, :data:`NO_SPEEDUPS`)."""
    return _confirmed(decision.deciding_rows(data.measurements))


# --- plots -------------------------------------------------------------------------------------


def figures(data: StudyData) -> dict[str, Figure]:
    """The report's figures by file stem; none when the study has no complete trial. The speedup
    plots need measured (paired) speedups: a study that was only screened has none."""
    served = {"served_vs_concurrency": plot_served(data.validations[0])} if data.validations else {}
    done = decision.deciding_rows(data.measurements)
    if not done:
        return served
    result = {"throughput_vs_concurrency": plot_throughput(data, done)}
    if _has_speedups(done):
        result["speedup_vs_depth"] = plot_speedup_vs_depth(data, done)
    result["pareto_front"] = plot_pareto(data, done)
    if any(m.acceptance_by_position for m in done):
        result["acceptance_by_position"] = plot_acceptance(data, done)
    verdicts = [v for v in method_verdicts(data) if v.method != decision.BASELINE]
    if any(entry["speedup"] is not None for v in verdicts for entry in v.by_concurrency):
        result["speedup_by_method"] = plot_speedup_by_method(data, verdicts)
    if prediction.checked_rows(data.measurements):
        result["predicted_vs_measured"] = plot_predicted_vs_measured(data)
    return {**result, **served}


def method_verdicts(data: StudyData) -> list[decision.MethodVerdict]:
    """The per-method verdict the tuner stores and prints (:func:`autotune.analysis.decision.method_verdicts`),
    for every method (each draft model apart) the study's trials used, simplest first."""
    order = {method: i for i, method in enumerate(METHOD_NAMES)}
    names = sorted({decision.method_name(m) for m in data.measurements},
                   key=lambda name: (order[name.split(":")[0]], name))
    return decision.method_verdicts(data.measurements, names)


def _has_speedups(rows: Sequence[TrialRow]) -> bool:
    return any(m.method != decision.BASELINE and decision.speedup_estimate(m) is not None for m in rows)


def _confirmed(rows: Sequence[TrialRow]) -> bool:
    return any(m.confirmed for m in rows)


def error_bars(estimates: Sequence[Estimate | None]) -> list[list[float]] | None:
    """matplotlib's asymmetric ``yerr`` (distances below and above each value) for ``estimates``;
    0 where one has no interval; None when none has one (nothing to draw)."""
    if not any(e is not None and e.has_interval for e in estimates):
        return None
    below = [e.value - e.low if e is not None and e.has_interval else 0.0 for e in estimates]
    above = [e.high - e.value if e is not None and e.has_interval else 0.0 for e in estimates]
    return [below, above]


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _by_series(measurements: Sequence[TrialRow]) -> dict[analysis.SeriesKey, list[TrialRow]]:
    order = {"none": 0, "mtp": 1, "draft": 2, "ngram": 3}
    series: dict[analysis.SeriesKey, list[TrialRow]] = {}
    for m in sorted(measurements, key=lambda m: (order[m.method], m.draft_fingerprint or "")):
        series.setdefault(analysis.series_key(m), []).append(m)
    return series


def _concurrency_axis(ax, concurrencies: Sequence[int]) -> None:  # noqa: ANN001 - a matplotlib Axes
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(concurrencies), [str(b) for b in concurrencies])
    ax.minorticks_off()


def _label(ax, xlabel: str, ylabel: str, title: str, legend_size: float | None = None) -> None:  # noqa: ANN001 - Axes
    """Axis labels with units, a title, a light grid and the legend: what every single-panel plot has."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=legend_size)


def plot_throughput(data: StudyData, done: Sequence[TrialRow]) -> Figure:
    """Best tokens/s at each concurrency per method, the best depth written next to each point, and
    the 95 % interval as error bars where the rows have one (confirmation rows)."""
    figure = _figure(7.5, 4.8)
    ax = figure.add_subplot()
    for key, trials in _by_series(done).items():
        best = decision.best_by_concurrency(trials)
        xs, ys = list(best), [m.tokens_per_s for m in best.values()]
        yerr = error_bars([m.estimate("tokens_per_s") for m in best.values()])
        ax.errorbar(xs, ys, yerr=yerr, marker="o", capsize=3, color=data.series_color(key), label=data.series_legend(key))
        if key[0] != "none":
            for m in best.values():
                ax.annotate(f"d{m.depth}", (m.concurrency, m.tokens_per_s), textcoords="offset points",
                            xytext=(4, 4), fontsize=7, color=data.series_color(key))
    _concurrency_axis(ax, sorted({m.concurrency for m in done}))
    what = "confirmed rows, error bars: 95 % intervals" if _confirmed(done) else "one screening run each, no interval"
    _label(ax, "concurrency (requests in flight)", "throughput (generated tokens/s)",
           f"Throughput against concurrency (best depth per method, dN = depth)\n{what}")
    return figure


SERVED_COLORS = {"schedule": "#1f77b4", "fixed": "#ff7f0e", "none": "#6b6b6b"}


def plot_served(validation: ValidationResult) -> Figure:
    """A validation: output tok/s and TPOT p50 against concurrency, one line per server (the
    schedule, the best fixed depth, none) with 95 % intervals over the runs as error bars."""
    figure = _figure(10, 4.2)
    panels = [("output_tokens_per_s", "output tokens/s", "Served throughput"),
              ("tpot_ms_p50", "TPOT p50 (ms)", "Served time per output token")]
    for index, (name, ylabel, heading) in enumerate(panels):
        ax = figure.add_subplot(1, 2, index + 1)
        for server in validation.servers:
            points = [p for p in server.points if p.figure(name) is not None]
            estimates = [p.figure(name) for p in points]
            ax.errorbar([p.concurrency for p in points], [e.value for e in estimates], yerr=error_bars(estimates),
                        marker="o", capsize=3, color=SERVED_COLORS.get(server.name),
                        label=f"{server.name}: {server.label}".replace("$", r"\$"))
        _concurrency_axis(ax, validation.concurrency)
        _label(ax, "concurrency (requests in flight)", ylabel,
               f"{heading} ({validation.runs} run(s) per point)", legend_size=7)
    return figure


def plot_speedup_vs_depth(data: StudyData, done: Sequence[TrialRow]) -> Figure:
    """One panel per concurrency: the paired speedup over the baseline (95 % interval as error bars)
    against depth, per speculative method, for the rows that have one."""
    concurrencies = sorted({m.concurrency for m in done})
    columns = min(3, len(concurrencies))
    rows = -(-len(concurrencies) // columns)
    figure = _figure(4.0 * columns, 3.2 * rows)
    axes = figure.subplots(rows, columns, sharey=True, squeeze=False).ravel()
    speculative = {k: v for k, v in _by_series(done).items() if k[0] != decision.BASELINE}
    depths = sorted({m.depth for trials in speculative.values() for m in trials}) or [0]
    for ax, concurrency in zip(axes, concurrencies):
        for key, trials in speculative.items():
            points = sorted(
                (m.depth, s) for m in trials if m.concurrency == concurrency and (s := decision.speedup_estimate(m)) is not None
            )
            if points:
                estimates = [s for _, s in points]
                ax.errorbar([d for d, _ in points], [s.value for s in estimates], yerr=error_bars(estimates),
                            marker="o", capsize=3, color=data.series_color(key), label=data.series_legend(key))
        ax.axhline(1.0, color=METHOD_COLORS["none"], linestyle="--", linewidth=1, label="baseline (none)")
        ax.set_xticks(depths)
        ax.set_title(f"concurrency {concurrency}")
        ax.set_xlabel("depth (draft tokens per step)")
        ax.grid(True, alpha=0.3)
    for ax in axes[len(concurrencies):]:
        ax.set_visible(False)
    for ax in axes[::columns]:
        ax.set_ylabel("speedup over none (x)")
    handles: dict = {}
    for ax in axes[:len(concurrencies)]:  # every series once, whichever panel drew it
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if handles:
        figure.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=len(handles))
    figure.suptitle("Paired speedup against speculation depth, per concurrency (95 % intervals)")
    return figure


def plot_acceptance(data: StudyData, done: Sequence[TrialRow]) -> Figure:
    """Mean acceptance at each draft position over a method's trials (position 1 = first draft token)."""
    figure = _figure(7.5, 4.5)
    ax = figure.add_subplot()
    longest = 1
    for key, trials in _by_series(done).items():
        sums: dict[int, list[float]] = {}
        for m in trials:
            for position, rate in enumerate(m.acceptance_by_position, start=1):
                sums.setdefault(position, []).append(rate)
        if not sums:
            continue
        positions = sorted(sums)
        longest = max(longest, positions[-1])
        means = [sum(sums[p]) / len(sums[p]) for p in positions]
        ax.plot(positions, means, marker="o", color=data.series_color(key), label=data.series_legend(key))
    ax.set_xticks(range(1, longest + 1))
    ax.set_ylim(0, 1.05)
    _label(ax, "draft position", "acceptance rate (fraction accepted)",
           "Acceptance per draft position (mean over concurrency levels and depths)")
    return figure


def plot_pareto(data: StudyData, done: Sequence[TrialRow]) -> Figure:
    """The deciding rows by TPOT and throughput (with their 95 % intervals where confirmed), the
    Pareto front, the chosen profile starred; a confirmed study's screening passes in grey."""
    figure = _figure(7.5, 5.0)
    ax = figure.add_subplot()
    timed = [m for m in done if m.tpot_ms_p50 is not None]
    if _confirmed(done):
        screened = [m for m in decision.screening_rows(data.measurements) if m.tpot_ms_p50 is not None]
        if screened:
            ax.scatter([m.tpot_ms_p50 for m in screened], [m.tokens_per_s for m in screened], s=10, alpha=0.35,
                       color="#bbbbbb", label="screening passes (one run each)")
    for key, trials in _by_series(timed).items():
        xerr = error_bars([m.estimate("tpot_ms_p50") for m in trials])
        yerr = error_bars([m.estimate("tokens_per_s") for m in trials])
        if xerr is None and yerr is None:
            ax.scatter([m.tpot_ms_p50 for m in trials], [m.tokens_per_s for m in trials], s=18, alpha=0.7,
                       color=data.series_color(key), label=data.series_legend(key))
        else:
            ax.errorbar([m.tpot_ms_p50 for m in trials], [m.tokens_per_s for m in trials], xerr=xerr, yerr=yerr,
                        fmt="o", markersize=4, capsize=2, alpha=0.8, color=data.series_color(key),
                        label=data.series_legend(key))
    front = pareto_front(timed)
    if front:
        ax.plot([m.tpot_ms_p50 for m in front], [m.tokens_per_s for m in front], color="black", linewidth=1,
                drawstyle="steps-post", label="Pareto front")
    chosen = _chosen(data, timed)
    if chosen is not None:
        ax.scatter([chosen.tpot_ms_p50], [chosen.tokens_per_s], marker="*", s=260, color="gold", edgecolors="black",
                   zorder=5, label=f"chosen profile: {chosen.config_label} at concurrency {chosen.concurrency}")
    _label(ax, "TPOT p50 (ms per output token, lower is better)", "throughput (generated tokens/s, higher is better)",
           "Throughput against latency: trials and Pareto front", legend_size=8)
    return figure


def _chosen(data: StudyData, trials: Sequence[TrialRow]) -> TrialRow | None:
    if data.profile is None or data.profile.chosen_trial is None:
        return None
    key = (data.profile.chosen_phase, data.profile.chosen_trial)
    return next((m for m in trials if m.key == key), None)


def plot_speedup_by_method(data: StudyData, verdicts: Sequence[decision.MethodVerdict]) -> Figure:
    """Per concurrency: each method's best paired speedup, as its verdict has it (95 % interval as
    error bars where confirmed); a method without a speedup at a concurrency has no bar there."""
    concurrencies = sorted({entry["concurrency"] for v in verdicts for entry in v.by_concurrency})
    figure = _figure(7.5, 4.5)
    ax = figure.add_subplot()
    width = 0.8 / len(verdicts)
    for i, verdict in enumerate(verdicts):
        key = next(analysis.series_key(m) for m in data.measurements if decision.method_name(m) == verdict.name)
        measured = [entry for entry in verdict.by_concurrency if entry["speedup"] is not None]
        estimates = [_table_estimate(entry, "speedup") for entry in measured]
        ax.bar([concurrencies.index(entry["concurrency"]) - 0.4 + width * (i + 0.5) for entry in measured],
               [e.value for e in estimates], width, yerr=error_bars(estimates), capsize=3,
               color=data.series_color(key), label=data.series_legend(key))
    ax.axhline(1.0, color=METHOD_COLORS["none"], linestyle="--", linewidth=1, label="baseline (none)")
    ax.set_xticks(range(len(concurrencies)), [str(b) for b in concurrencies])
    ax.grid(True, axis="y", alpha=0.3)
    _label(ax, "concurrency", "best paired speedup over none (x)",
           "Best speedup per method at each concurrency (95 % intervals)", legend_size=8)
    return figure


def plot_predicted_vs_measured(data: StudyData) -> Figure:
    """The screening trials the performance model predicted before they ran: measured tokens/s
    (x) against predicted (y) on log-log axes, the prediction's 95 % interval as vertical error
    bars, coloured by method (hollow markers: roofline predictions, where the study has both
    kinds), and the y = x line; the title gives the median absolute error and n."""
    checked = prediction.checked_rows(data.measurements)
    from matplotlib.ticker import LogFormatter

    figure = _figure(7.0, 6.0)
    ax = figure.add_subplot()
    sources = {(m.prediction or {}).get("source") for m in checked}
    extent: list[float] = []
    for key, trials in _by_series(checked).items():
        by_source: dict[str | None, list[TrialRow]] = {}
        for m in trials:
            by_source.setdefault((m.prediction or {}).get("source"), []).append(m)
        for source, group in sorted(by_source.items(), key=lambda item: str(item[0])):
            guesses = [prediction.predicted(m) for m in group]
            xs, ys = [m.tokens_per_s for m in group], [g.value for g in guesses]
            below = [g.value - g.low if g.has_interval else 0.0 for g in guesses]
            above = [g.high - g.value if g.has_interval else 0.0 for g in guesses]
            extent += xs + [y - b for y, b in zip(ys, below)] + [y + a for y, a in zip(ys, above)]
            hollow = len(sources) > 1 and source == "roofline"
            label = data.series_legend(key) + (f", {source} prediction" if len(sources) > 1 and source else "")
            color = data.series_color(key)
            ax.errorbar(xs, ys, yerr=[below, above] if any(below) or any(above) else None, fmt="o", markersize=5,
                        capsize=2, alpha=0.8, color=color, markerfacecolor="none" if hollow else color, label=label)
    low, high = min(extent) / 1.15, max(extent) * 1.15
    ax.plot([low, high], [low, high], color="black", linestyle="--", linewidth=1, label="predicted = measured")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_aspect("equal", adjustable="box")
    for axis in (ax.xaxis, ax.yaxis):  # plain numbers (250, not 2.5 x 10^2), minor ticks labelled on a short range
        axis.set_major_formatter(LogFormatter(labelOnlyBase=False))
        axis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    error, n = prediction.prediction_error(checked)
    inside, intervals = prediction.within_interval(checked)
    coverage = f",\n{inside} of {intervals} measured inside the predicted 95 % interval" if intervals else ""
    _label(ax, "measured throughput (generated tokens/s)", "predicted throughput (generated tokens/s)",
           f"Predicted (before the trial ran) against measured tokens/s\n"
           f"median |predicted/measured - 1| = {error:.1%} over n = {n} screening trials{coverage}", legend_size=8)
    ax.title.set_fontsize(10)
    ax.grid(True, which="minor", alpha=0.15)
    return figure


# --- HTML --------------------------------------------------------------------------------------

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { margin-bottom: 0.2em; } .meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f2f2f2; } td.text, th.text { text-align: left; }
.verdict { background: #f6f9fc; border-left: 4px solid #1f77b4; padding: 0.6em 1em; }
.edge { background: #fff8e6; border-left: 4px solid #ff7f0e; padding: 0.6em 1em; }
figure { margin: 1.5em 0; } img { max-width: 100%; border: 1px solid #eee; }
tr.failed td { color: #999; } tr.superseded td { color: #999; }
.note { color: #555; font-size: 0.9em; }
"""

PLOT_CAPTIONS = {
    "throughput_vs_concurrency": "Throughput against concurrency per method (best depth at each concurrency; "
                                "error bars: 95 % intervals of confirmed rows).",
    "speedup_vs_depth": "Paired speedup over the baseline against depth, one panel per concurrency "
                        "(error bars: 95 % intervals).",
    "acceptance_by_position": "Acceptance rate per draft position.",
    "pareto_front": "The deciding rows by TPOT and throughput (error bars: 95 % intervals); the Pareto front and the "
                    "chosen profile (star).",
    "speedup_by_method": "Each method's best paired speedup over the baseline per concurrency, as the verdict above "
                         "has it (error bars: 95 % intervals).",
    "served_vs_concurrency": "The profile served (autotune validate): output tok/s and TPOT p50 against concurrency "
                             "for the exported schedule, the best fixed depth and none (error bars: 95 % intervals "
                             "over the runs).",
    "predicted_vs_measured": "Tokens/s the performance model predicted before each screening trial ran (error "
                             "bars: the prediction's 95 % interval) against what the trial measured; on the "
                             "dashed line the prediction was exact.",
}
NO_SPEEDUPS = ("This study was only screened (one run per configuration): speedups are measured paired with the "
               "baseline in the confirmation phase, so none is reported and figures have no interval.")


def render_html(data: StudyData, pngs: dict[str, bytes]) -> str:
    """The report page; ``pngs`` (file stem -> PNG bytes) are embedded as data URIs."""
    e = html.escape
    study = data.study
    done = decision.deciding_rows(data.measurements)
    screened = [m for m in data.measurements if not m.confirmed]
    confirmation = [m for m in data.measurements if m.confirmed]
    counts = f"{len(screened)} screening trials ({sum(m.complete for m in screened)} complete)"
    if confirmation:
        runs = sorted({run for m in confirmation if (run := decision.confirmation_run(m)) is not None})
        counts += (f", {len(confirmation)} confirmation rows (run{'s' * (len(runs) > 1)} "
                   f"{', '.join(map(str, runs))}; the latest decides)")
    parts = [
        "<!DOCTYPE html>",
        f"<html lang='en'><head><meta charset='utf-8'><title>autotune report: {e(study.name)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Study {e(study.name)}</h1>",
        f"<p class='meta'>target <b>{e(data.target.name)}</b> ({e(data.target.fingerprint)}) on "
        f"<b>{e(data.hardware.name)}</b> ({e(data.hardware.fingerprint)}) &middot; engine {e(study.engine)} "
        f"&middot; objective {e(study.objective)} &middot; workload {e(study.workload_name)} &middot; "
        f"{e(counts)} &middot; status {e(study.status)} &middot; started {e(utc_iso(study.created_at) or '')}</p>",
        "<p class='note'>Figures are means over repeated, interleaved rounds with 95 % intervals "
        "(&plusmn; relative half-width, [low, high] for speedups) and the number of rounds n; a speedup is "
        "measured paired with the baseline in the same rounds.</p>" if _confirmed(done) else
        f"<p class='note'>{e(NO_SPEEDUPS)}</p>",
        "<h2>Deployment profile</h2>",
        _profile_html(data.profile),
        _categories_html(data.profile, data.measurements),
        "<h2>Verdict per method</h2>",
        _verdict_html(method_verdicts(data)),
        _edges_html(data),
    ]
    if not pngs:
        parts.append("<p>No complete trial: nothing to plot.</p>")
    accuracy = _prediction_html(data.measurements)
    if accuracy:
        parts.append(accuracy)
    for name, png in pngs.items():
        uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        caption = PLOT_CAPTIONS.get(name, name)
        parts.append(f"<figure><img src='{uri}' alt='{e(caption)}'><figcaption>{e(caption)} "
                     f"(also <a href='{e(name)}.png'>{e(name)}.png</a>)</figcaption></figure>")
    if data.profile and data.profile.per_concurrency:
        parts += ["<h2>Best configuration per concurrency</h2>", _per_concurrency_table(data.profile.per_concurrency)]
    if data.validations:
        parts += ["<h2>Served (autotune validate)</h2>", _served_html(data.validations[0])]
    parts += ["<h2>All trials</h2>", _trials_table(data)]
    parts.append(f"<p class='meta'>Written by autotune {e(__version__)}.</p></body></html>")
    return "\n".join(parts) + "\n"


class Html(str):
    """Markup built here from constants (:data:`DASH`): :func:`_table` writes it as is and escapes
    every other cell, so a value read from the database (a model or study name, an imported
    profile's table) is always text, never markup."""


DASH = Html("&ndash;")


def _prediction_html(rows: Sequence[TrialRow]) -> str:
    """One note on how well the performance model predicted the screening trials; empty when no
    trial has a prediction."""
    if not _has_predictions(rows):
        return ""
    error, n = prediction.prediction_error(rows)
    if error is None:
        return ("<p class='note'>The performance model made predictions, but no screening trial with one "
                "completed: nothing to compare.</p>")
    inside, intervals = prediction.within_interval(rows)
    coverage = f"; {inside} of {intervals} measured inside the predicted 95 % interval" if intervals else ""
    return (f"<p class='note'>The performance model predicted {n} screening trial{'s' * (n != 1)} before they "
            f"ran: median absolute error {error:.1%} (|predicted / measured - 1|){coverage}.</p>")


def _has_predictions(rows: Sequence[TrialRow]) -> bool:
    return any(m.prediction for m in rows)


def _predicted(m: TrialRow) -> str:
    """``"1,790 [1,400, 2,290]"``, the value alone without an interval, a dash without a prediction."""
    guess = prediction.predicted(m)
    if guess is None:
        return DASH
    if not guess.has_interval:
        return _num(guess.value)
    return f"{_num(guess.value)} [{_num(guess.low)}, {_num(guess.high)}]"


def _num(value: float | int | None, digits: int = 3) -> str:
    if value is None:
        return DASH
    if isinstance(value, int) or not isinstance(value, float):  # an imported table may hold any JSON value
        return str(value)
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.{digits}g}"


def _estimate(estimate: Estimate | None, digits: int = 4) -> str:
    """``"478.4 ±1.4%"``, the value alone for one run, a dash for nothing."""
    return DASH if estimate is None else format_estimate(estimate, digits)


def _speedup(estimate: Estimate | None, baseline: bool = False) -> str:
    """``"1.44x [1.41, 1.46]"``; the baseline is 1 by definition; a dash where none was measured."""
    if estimate is None:
        return DASH
    if baseline:
        return "1x (baseline)"
    return format_speedup(estimate)


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]], text_columns: Sequence[int] = (),
           row_classes: Sequence[str] | None = None) -> str:
    """An HTML table; each cell is escaped unless it is :class:`Html`."""

    def attr(i: int) -> str:
        return " class='text'" if i in text_columns else ""

    head = "".join(f"<th{attr(i)}>{html.escape(h)}</th>" for i, h in enumerate(headers))
    body = []
    for r, row in enumerate(rows):
        cls = f" class='{row_classes[r]}'" if row_classes and row_classes[r] else ""
        cells = "".join(f"<td{attr(i)}>{c if isinstance(c, Html) else html.escape(str(c))}</td>"
                        for i, c in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _served_html(validation: ValidationResult) -> str:
    """The newest validation as a table (every figure with its interval) and its tuned-vs-served gaps."""
    from autotune.validation.table import COLUMNS, summary_lines, title, validation_rows

    rows = [[row[column] for column in COLUMNS] for row in validation_rows(validation)]
    notes = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(validation))
    return (f"<p class='meta'>{html.escape(title(validation))}</p>" + _table(COLUMNS, rows, text_columns=(1, 2))
            + f"<ul>{notes}</ul>")


def _profile_html(profile: DeploymentProfile | None) -> str:
    if profile is None:
        return "<p>This study has not written a deployment profile (yet).</p>"
    draft = profile.draft.name if profile.draft else DASH
    tied = [label for label in profile.tied_with if label != profile.label()]
    confirmed = "yes" if profile.confirmed else "no (one screening run)"
    row = [profile.id, profile.label(), draft, profile.concurrency, profile.objective,
           _estimate(profile.estimate("tokens_per_s")), _estimate(profile.estimate("tpot_ms_p50")),
           _speedup(profile.estimate("speedup"), baseline=profile.method == decision.BASELINE),
           profile.repetitions, confirmed, ", ".join(tied) or DASH, utc_iso(profile.created_at) or ""]
    headers = ["id", "configuration", "draft", "concurrency", "objective", "tokens/s", "TPOT p50 (ms)", "speedup (x)", "n",
               "confirmed", "tied within noise", "created"]
    table = _table(headers, [row], text_columns=(1, 2, 4, 9, 10, 11))
    if tied:
        table += (f"<p class='note'>At concurrency {profile.concurrency}, {html.escape(profile.label())} and "
                  f"{html.escape(', '.join(tied))} are within noise of each other (their paired 95 % interval "
                  f"includes 1): {html.escape(profile.label())} is the simplest to operate.</p>")
    return table


def _verdict_html(verdicts: Sequence[decision.MethodVerdict]) -> str:
    """The verdict in the words of the tuner's summary (:func:`autotune.analysis.decision.verdict_lines`),
    then each method's best configuration at every concurrency it was measured at."""
    lines = decision.verdict_lines(verdicts)
    if not lines:
        return "<p class='verdict'>No speculative method completed a trial in this study.</p>"
    rows = []
    for verdict in verdicts:
        if verdict.method == decision.BASELINE:
            continue
        for entry in verdict.by_concurrency:
            rows.append([verdict.name, entry["concurrency"], entry["depth"], _num(entry["tokens_per_s"]),
                         _speedup(_table_estimate(entry, "speedup")), entry["repetitions"], _num(entry["acceptance_rate"]),
                         _num(entry["acceptance_length"]), "yes" if entry["concurrency"] in verdict.wins_at else "no"])
    headers = ["method", "concurrency", "best depth", "tokens/s", "speedup (x)", "n", "acceptance rate",
               "acceptance length", "recommended here"]
    text = "<br>".join(html.escape(line) for line in lines)
    return f"<p class='verdict'>{text}</p>\n" + _table(headers, rows, text_columns=(0, 8))


def _edges_html(data: StudyData) -> str:
    """The builds the study cost, and each answer on the edge of its space, in the words of the
    tuner's summary (:mod:`autotune.analysis.edges`)."""
    # The search package loads Optuna: imported only when a report is written.
    from autotune.search.objective import Slo
    from autotune.search.outcome import TrialListing

    listing = TrialListing.of(list(data.measurements), data.study.search_space, Slo.from_dict(data.study.slo or {}))
    return "".join(f"<p class='{'edge' if i else 'meta'}'>{html.escape(line)}</p>\n"
                   for i, line in enumerate(listing.lines()))


def _table_estimate(row: dict, name: str) -> Estimate | None:
    value = row.get(name)
    if value is None:
        return None
    return Estimate(float(value), row.get(f"{name}_low"), row.get(f"{name}_high"), int(row.get("repetitions") or 1))


def _per_concurrency_table(rows: Sequence[dict]) -> str:
    """The tuner's table of recommendations (depth 0: speculation off); rows without a complete
    trial show dashes; tables stored before intervals existed read as one run each."""
    headers = ["concurrency", "depth to serve", "configuration", "tokens/s", "speedup (x)", "n", "tied within noise",
               "acceptance rate", "trials", "note"]
    body = []
    for r in rows:
        label = r.get("label") or (None if r.get("method") is None else
                                   r["method"] if r["method"] == "none" else f"{r['method']}@{r.get('depth')}")
        baseline = r.get("method") == decision.BASELINE
        depth = (0 if baseline else r.get("depth")) if label else None
        tied = [t for t in r.get("tied") or [] if t != label]
        note = r.get("note") or ("" if r.get("confirmed") or not label else "screening: one run")
        body.append([r.get("concurrency"), _num(depth), label or DASH,
                     _estimate(_table_estimate(r, "tokens_per_s")), _speedup(_table_estimate(r, "speedup"), baseline),
                     _num(r.get("repetitions") or (1 if label else None)), ", ".join(map(str, tied)) or DASH,
                     _num(r.get("acceptance_rate")), _num(r.get("trials")), note])
    return _table(headers, body, text_columns=(2, 6, 9))


def _phase(m: TrialRow) -> str:
    run = decision.confirmation_run(m)
    return m.phase if run is None else f"confirmation {run}"


def _trials_table(data: StudyData) -> str:
    """Every stored row: the screening trials, then the confirmation rows (earlier runs greyed); when
    the study has predictions, the predicted tokens/s and the prediction's error after tokens/s."""
    predicted = _has_predictions(data.measurements)
    headers = ["phase", "trial", "state", "method", "draft", "depth", "concurrency", "n", "tokens/s",
               *(["predicted tokens/s", "error"] if predicted else []), "TPOT p50 (ms)",
               "speedup (x)", "acceptance rate", "peak memory (MiB)", "note"]
    deciding = {m.key for m in decision.deciding_rows(data.measurements)}
    latest = max((run for m in data.measurements if (run := decision.confirmation_run(m)) is not None), default=None)
    rows, classes = [], []
    order = {"screening": 0, "confirmation": 1}
    for m in sorted(data.measurements, key=lambda m: (order.get(m.phase, 2), decision.confirmation_run(m) or 0,
                                                      m.concurrency, m.method, m.depth, m.trial_number)):
        draft = data.series_name(analysis.series_key(m)) if m.method == "draft" else DASH
        memory = _num(m.peak_memory_bytes / 2**20) if m.peak_memory_bytes else DASH
        measured = m.complete
        speedup = decision.speedup_estimate(m) if measured and m.confirmed else None
        notes = [m.reason] if m.reason else []
        if m.extra.get("dropped"):
            notes.append("raced out (slower than the leader at 95 %)")
        if m.extra.get("noisy"):
            notes.append("measured while the machine was busy")
        if m.extra.get("implausible"):
            notes.append(f"speedups withheld: {m.extra['implausible']}")
        error = prediction.relative_error(m)
        rows.append([_phase(m), m.trial_number, m.state, m.method, draft, m.depth, m.concurrency,
                     m.repetitions if measured else DASH,
                     _estimate(m.estimate("tokens_per_s")) if measured else DASH,
                     *([_predicted(m), DASH if error is None else format_error(error)]
                       if predicted else []),
                     _estimate(m.estimate("tpot_ms_p50")) if measured else DASH,
                     _speedup(speedup, baseline=m.method == decision.BASELINE),
                     _num(m.acceptance_rate), memory, "; ".join(notes)])
        run = decision.confirmation_run(m)
        superseded = run is not None and latest is not None and run < latest
        classes.append("failed" if not measured else "superseded" if superseded or (m.key not in deciding and m.confirmed) else "")
    return _table(headers, rows, text_columns=(0, 2, 3, 4, len(headers) - 1), row_classes=classes)


def _categories_html(profile: DeploymentProfile | None, measurements: Sequence[TrialRow]) -> str:
    """The profile configuration's acceptance per request category (95 % intervals over each
    category's prompts) and where two categories differ beyond their intervals; empty for a
    workload without categories."""
    from autotune.profiles.categories import category_differences, category_rows, profile_categories

    by_category = profile_categories(profile, measurements) if profile is not None else None
    if not by_category:
        return ""
    rows = [[row["category"], _num(row["acceptance_length"], 4),
             DASH if row["low"] is None else f"[{_num(row['low'], 4)}, {_num(row['high'], 4)}]",
             row["prompts"], row["requests"], _num(row["tokens_per_request"]), f"{row['share']:.0%}"]
            for row in category_rows(by_category)]
    headers = ["category", "acceptance length", "95 % interval", "prompts", "requests", "tokens/request", "share"]
    notes = "".join(f"<p class='note'>{html.escape(line)}</p>" for line in category_differences(by_category))
    return (f"<h2>Acceptance per request category ({html.escape(profile.label())} c{profile.concurrency})</h2>"
            + _table(headers, rows, text_columns=(0,)) + notes
            + "<p class='note'>Tokens after the first per decode step, pooled over each category's requests; "
              "<code>autotune profiles show ID --mix code=0.3,chat=0.7</code> predicts the profile's figures for "
              "another mix.</p>")
