"""The study report's figures, drawn with matplotlib's object API on the Agg canvas (no pyplot, no
global backend switch, nothing needs a display): throughput against concurrency per method; speedup
against depth per method at each concurrency; acceptance per draft position; the throughput/TPOT
Pareto front with the chosen profile marked; each method's best speedup per concurrency; predicted
against measured tokens/s; and a validated profile's served tok/s and TPOT against concurrency.

Every figure is read from the rows that decide; a speedup is only ever the stored, paired one
(:func:`~autotune.analysis.decision.speedup_estimate`), so a study that was only screened has no
speedup plots."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING

from autotune.analysis import decision, prediction
from autotune.analysis.decision import pareto_front
from autotune.analysis.intervals import Estimate
from autotune.profiles import analysis
from autotune.render import table_estimate
from autotune.report.study import METHOD_COLORS, StudyData, confirmed, method_verdicts
from autotune.store.results import TrialRow

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from autotune.validation.results import ValidationResult

DPI = 110


def plot_pngs(data: StudyData) -> dict[str, bytes]:
    """The report's plots as PNG files' bytes, by file stem (what :func:`write_report` writes, and
    the service serves where the served report links them)."""
    return {name: _png(figure) for name, figure in figures(data).items()}



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




def _has_speedups(rows: Sequence[TrialRow]) -> bool:
    return any(m.method != decision.BASELINE and decision.speedup_estimate(m) is not None for m in rows)



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
    what = "confirmed rows, error bars: 95 % intervals" if confirmed(done) else "one screening run each, no interval"
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
    if confirmed(done):
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
        estimates = [table_estimate(entry, "speedup") for entry in measured]
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

