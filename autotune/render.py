"""Human-readable output: rich tables and spinners for the CLI's results (no click here)."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

if TYPE_CHECKING:
    from autotune.store import SchemaStatus

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


def format_value(value: float | None, digits: int = 3) -> str:
    """A number with sensible significant digits, or '-' when unknown."""
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


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


def short_hardware(name: str) -> str:
    """A hardware name short enough for a table column: "1x NVIDIA H200" -> "H200", "8x NVIDIA H100
    80GB HBM3" -> "8x H100", "1x NVIDIA A10 + 1x NVIDIA L4" -> "A10+L4", "cpu: AMD EPYC (2 cores,
    24 GiB)" -> "CPU 2c"; a name it does not recognise stays whole."""
    cpu = re.fullmatch(r"cpu: .*\((\d+) cores?,.*\)", name)
    if cpu:
        return f"CPU {cpu.group(1)}c"
    parts = []
    for part in name.split(" + "):
        gpu = re.fullmatch(r"(?:(\d+)x )?NVIDIA ([\w.]+).*", part.strip())
        if gpu is None:
            return name
        count, model = gpu.groups()
        parts.append(model if count in (None, "1") else f"{count}x {model}")
    return "+".join(parts)


# Every column of `profiles list` / `profiles best`; the optional ones go first when the terminal is narrow.
PROFILE_COLUMNS = ["id", "created", "study", "hardware", "model", "config", "draft", "c", "tokens/s", "speedup"]
PROFILE_OPTIONAL = ("created", "study", "draft")


def profile_summary_row(profile, wide: bool = False) -> dict:  # noqa: ANN001 - autotune.profiles.data.DeploymentProfile
    """One line of ``profiles list``: the hardware by its short label unless ``wide``."""
    summary = profile.summary()
    return {
        "id": summary["id"], "created": summary["created_at"], "study": summary["study"],
        "hardware": summary["hardware"] if wide else short_hardware(summary["hardware"]), "model": summary["model"],
        "config": profile.label(), "draft": summary["draft"], "c": summary["concurrency"],
        "tokens/s": summary["tokens_per_s"], "speedup": summary["speedup"],
    }


def print_profiles(profiles: list, title: str, wide: bool = False) -> None:
    """``profiles list`` and ``profiles best``: a line per profile, newest first."""
    print_rows([profile_summary_row(p, wide) for p in profiles], PROFILE_COLUMNS, title=title,
               optional=PROFILE_OPTIONAL, wide=wide)


# Every column of `studies` (StudySummary); the optional ones go first, in this order, when the terminal is narrow.
STUDY_COLUMNS = ["name", "status", "engine", "objective", "hardware", "target", "workload", "done", "failed",
                 "infeasible", "best", "tokens/s", "speedup", "created", "finished"]
STUDY_OPTIONAL = ("created", "finished", "objective", "engine", "workload", "infeasible", "target", "failed",
                  "tokens/s", "hardware", "status")


def print_studies(studies: list, wide: bool = False) -> None:  # noqa: ANN001 - autotune.store.results.StudySummary
    """``autotune studies``: a line per study, its trial counts and best configuration."""
    rows = []
    for study in studies:
        data = study.to_dict()
        rows.append({
            "name": data["name"], "status": data["status"], "engine": data["engine"], "objective": data["objective"],
            "hardware": data["hardware"] if wide else short_hardware(data["hardware"]), "target": data["target"],
            "workload": data["workload"], "done": data["trials_complete"], "failed": data["trials_failed"],
            "infeasible": data["trials_infeasible"], "best": data["best"], "tokens/s": data["best_tokens_per_s"],
            "speedup": data["best_speedup"], "created": data["created_at"], "finished": data["finished_at"],
        })
    print_rows(rows, STUDY_COLUMNS, title="Studies", optional=STUDY_OPTIONAL, wide=wide)


def print_lines(lines: list[str]) -> None:
    """Plain lines, e.g. a tuning summary."""
    console = stdout()
    for line in lines:
        console.print(line)


MEASURE_FIGURES = (  # (label, Measurement attribute, scale): one row each, so the table stays narrow
    ("tokens/s", "tokens_per_s", 1), ("TTFT p50 ms", "ttft_ms_p50", 1), ("TTFT p99 ms", "ttft_ms_p99", 1),
    ("TPOT p50 ms", "tpot_ms_p50", 1), ("TPOT p99 ms", "tpot_ms_p99", 1), ("acceptance", "acceptance_rate", 1),
    ("tokens per target pass", "acceptance_length", 1), ("drafted tokens", "drafted_tokens", 1),
    ("accepted tokens", "accepted_tokens", 1), ("peak memory MiB", "peak_memory_bytes", 2**-20),
    ("wall time s", "wall_time_s", 1),
)


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


def format_estimate(estimate, digits: int = 3) -> str:  # noqa: ANN001 - autotune.analysis.intervals.Estimate
    """``"412 ±2.1%"`` (the 95 % interval's relative half-width), the value alone without an
    interval, '-' for None."""
    if estimate is None:
        return "-"
    width = estimate.relative_half_width
    value = format_value(estimate.value, digits)
    return value if width is None else f"{value} ±{width:.1%}"


def format_speedup(estimate) -> str:  # noqa: ANN001 - autotune.analysis.intervals.Estimate
    """``"1.84x [1.79, 1.90]"``; ``"1.84x (n=1, no interval)"`` for a single run."""
    if estimate is None:
        return "-"
    if not estimate.has_interval:
        return f"{estimate.value:.2f}x (n={estimate.n}, no interval)"
    return f"{estimate.value:.2f}x [{estimate.low:.2f}, {estimate.high:.2f}]"


def noise_line(repeated) -> str | None:  # noqa: ANN001 - autotune.engines.protocol.RepeatedMeasurement
    """One line when a configuration's figures are noisy (wide interval, or measured under load)."""
    width = repeated.tokens_per_s.relative_half_width
    other = repeated.noise.get("other_cpu_cores_max")
    load = f"; other processes used up to {other:.2f} cores" if other is not None else ""
    if repeated.noisy:
        return f"noisy: {repeated.config.label()} was measured while the machine was busy{load}"
    if width is not None and width > 0.1:
        return f"noisy: {repeated.config.label()} varies by ±{width:.0%} over {repeated.repetitions} runs{load}"
    return None


def print_measure(report) -> None:  # noqa: ANN001 - autotune.measure.MeasureReport (torch-free import avoided)
    """One configuration's figures with their 95 % intervals (a row per figure, a column per
    configuration), the paired speedup, and the verification against the baseline if it ran."""
    m = report.measurement
    runs = {f"{report.config.label()} c{m.concurrency}": report.repeated}
    if report.baseline is not None:
        runs["none (baseline)"] = report.protocol.baseline
    rows = []
    for label, attribute, scale in MEASURE_FIGURES:
        row = {"figure": label}
        for name, run in runs.items():
            estimate = run.estimates.get(attribute)
            row[name] = (format_estimate(estimate.scaled(scale)) if estimate is not None
                         else _scaled(getattr(run.measurement, attribute), scale))
        rows.append(row)
    protocol = report.protocol
    print_rows(rows, ["figure", *runs], title=f"{m.workload_name}: {m.n_requests} requests, {m.output_tokens} tokens, "
                                              f"{report.repeated.repetitions} runs each, 95 % intervals")
    console = stdout()
    if m.acceptance_by_position:
        console.print("acceptance by draft position: " + " ".join(f"{a:.2f}" for a in m.acceptance_by_position))
    if report.speedup is not None:
        console.print(f"speedup over baseline (paired, {report.speedup.n} rounds): {format_speedup(report.speedup)}")
    if protocol.capped:
        console.print(f"stopped at the {protocol.capped} cap before reaching ±{protocol.options.precision:.0%}")
    if protocol.rounds_discarded:
        console.print(f"{protocol.rounds_discarded} round(s) measured again: {protocol.faults[-1]}")
    for run in runs.values():
        line = noise_line(run)
        if line:
            console.print(line)
    if report.outputs_match is not None:
        if report.outputs_match:
            console.print("verify: outputs identical to the baseline, token for token")
        else:
            d = report.first_divergence
            console.print(f"verify: outputs DIFFER — request {d.request_index}, token {d.token_index}: "
                          f"expected {d.expected}, got {d.got} (logit margin {d.logit_margin})")


# Short headers: the table must stay readable on an 80-column terminal.
TRIAL_COLUMNS = ["#", "phase", "config", "c", "state", "n", "tokens/s", "speedup", "accept", "note"]
# Added after tokens/s when a trial of the study has a prediction (older studies: the columns above only).
PREDICTION_COLUMNS = ["pred", "err"]
# With them, on a 120-column terminal: these short cells stay on one line, config, speedup and note wrap.
UNWRAPPED_TRIAL_COLUMNS = ("#", "phase", "c", "state", "n", "tokens/s", *PREDICTION_COLUMNS, "accept")


def _compact(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def format_prediction(predicted) -> str:  # noqa: ANN001 - autotune.analysis.prediction.Predicted
    """``"1790 [1400,2290]"`` (the 95 % interval, no spaces: the column stays narrow); the value
    alone without an interval; '-' for None."""
    if predicted is None:
        return "-"
    if not predicted.has_interval:
        return _compact(predicted.value)
    return f"{_compact(predicted.value)} [{_compact(predicted.low)},{_compact(predicted.high)}]"


def format_error(error: float | None) -> str:
    """A prediction's relative error, predicted / measured - 1: ``"+7.8%"``; '-' for None."""
    return "-" if error is None else f"{error:+.1%}"


def trial_speedup(row) -> str:  # noqa: ANN001 - a TrialFigures row (a TrialRow)
    """The row's stored, paired speedup with its interval; the baseline's is 1 by definition; '-'
    for a screening row (one pass: no speedup is measured there)."""
    from autotune.analysis.decision import BASELINE, speedup_estimate

    if not row.confirmed:
        return "-"
    if row.method == BASELINE:
        return "1x (baseline)"
    return format_speedup(speedup_estimate(row))


def trial_notes(row) -> str | None:  # noqa: ANN001 - a TrialFigures row
    """Why a row failed, a screening pass the machine's load disturbed however often it was
    measured again or measured under a load that persisted, one measured again for lying far below its prediction (or whose repetition
    failed), and what the confirmation protocol said about it (raced out, noisy, capped,
    implausible concurrency)."""
    extra = row.extra or {}
    notes = [row.reason] if row.reason else []
    if extra.get("disturbed"):
        notes.append(f"screened while the machine was busy ({extra['disturbed']}; "
                     f"{1 + int(extra.get('disturbed_reruns', 0))} passes): not used to guide the search")
    if extra.get("loaded"):
        notes.append(f"screened under a load that persisted ({extra['loaded']}): the loaded machine's figure, "
                     "used to guide the search")
    if extra.get("rerun_failed"):
        notes.append(f"measuring it again failed ({extra['rerun_failed']}): the pass before it stands")
    elif extra.get("surprise_rerun") is not None:
        notes.append(f"screened twice: the first pass ({extra['surprise_rerun']:.0f} tok/s) lay far below "
                     "its prediction; the faster kept")
    if extra.get("dropped"):
        notes.append("raced out: slower than the leader at 95 %")
    if extra.get("noisy"):
        notes.append("measured while the machine was busy")
    if extra.get("capped"):
        notes.append(f"stopped at the {extra['capped']} cap")
    if extra.get("implausible"):
        notes.append(f"speedups withheld: {extra['implausible']}")
    return "; ".join(notes) or None


def trial_row(row) -> dict:  # noqa: ANN001 - a TrialFigures row with the trial's configuration
    """One line of ``autotune trials``: the configuration, n, tokens/s and speedup with their 95 %
    intervals (screening rows: one pass, no interval, no speedup), and the tokens/s the performance
    model predicted before the trial ran with the prediction's error, where both exist."""
    from autotune.analysis.decision import config_label
    from autotune.analysis.prediction import predicted, relative_error

    if row.confirmed:
        run = (row.extra.get("confirmation") or {}).get("run")
        phase = f"confirm {run}" if run is not None else "confirm"
    else:
        phase = "screen"
    return {
        "#": row.trial_number, "phase": phase, "config": config_label(row), "c": row.concurrency, "state": row.state,
        "n": row.repetitions if row.tokens_per_s is not None else None,
        "tokens/s": format_estimate(row.estimate("tokens_per_s"), 4) if row.tokens_per_s is not None else "-",
        "speedup": trial_speedup(row) if row.tokens_per_s is not None else "-",
        "accept": row.acceptance_rate, "note": trial_notes(row),
        "pred": format_prediction(predicted(row)), "err": format_error(relative_error(row)),
    }


def trial_columns(rows: list) -> list[str]:
    """:data:`TRIAL_COLUMNS`, with pred and err after tokens/s when a row has a prediction."""
    if not any(getattr(row, "prediction", None) for row in rows):
        return list(TRIAL_COLUMNS)
    at = TRIAL_COLUMNS.index("tokens/s") + 1
    return TRIAL_COLUMNS[:at] + PREDICTION_COLUMNS + TRIAL_COLUMNS[at:]


def prediction_lines(rows: list) -> list[str]:
    """What pred and err mean, and the median error over the screening trials; none when no row
    has a prediction."""
    from autotune.analysis.prediction import prediction_error, within_interval

    if not any(getattr(row, "prediction", None) for row in rows):
        return []
    lines = ["pred: tokens/s the performance model predicted before the trial ran [95 % interval]; "
             "err: predicted / measured - 1"]
    error, n = prediction_error(rows)
    if error is not None:
        inside, intervals = within_interval(rows)
        coverage = f", {inside} of {intervals} measured inside the interval" if intervals else ""
        lines.append(f"prediction error: median |err| {error:.1%} over {n} screening trial{'s' * (n != 1)}{coverage}")
    return lines


def print_trials(rows: list, title: str, wide: bool = False, notes: Sequence[str] = ()) -> None:
    """``autotune trials``: a row per stored trial, screening then confirmation; predicted tokens/s
    and the prediction's error next to the measured ones when the study has predictions; ``notes``
    (the builds, the edges) under it. On a narrow terminal accept, n, err and pred go first, in that
    order (``wide``: every column)."""
    confirmed = any(row.confirmed for row in rows)
    columns = trial_columns(rows)
    predicted = len(columns) > len(TRIAL_COLUMNS)
    print_rows([trial_row(row) for row in rows], columns,
               title=f"{title} (confirmation rows: 95 % intervals over n rounds)" if confirmed else title,
               no_wrap=UNWRAPPED_TRIAL_COLUMNS if predicted else (), compact=predicted,
               optional=("accept", "n", *reversed(PREDICTION_COLUMNS)), wide=wide)
    console = stdout()
    if rows and not confirmed:
        console.print("screening rows only: one pass each, no interval and no speedup "
                      "(speedups are measured paired with the baseline in the confirmation phase)")
    for line in [*prediction_lines(rows), *notes]:
        console.print(line)


def _row_estimate(row: dict, name: str):  # noqa: ANN202 - an Estimate or None
    from autotune.analysis.intervals import Estimate

    value = row.get(name)
    if value is None:
        return None
    return Estimate(float(value), row.get(f"{name}_low"), row.get(f"{name}_high"), int(row.get("repetitions") or 1))


def concurrency_row(row: dict) -> dict:
    """One line of a profile's per-concurrency table (a ConcurrencyBest dict; tables stored before
    intervals existed lack the interval keys and read as one run)."""
    label = row.get("label") or (None if row.get("method") is None else
                                 row["method"] if row["method"] == "none" else f"{row['method']}@{row.get('depth')}")
    speculation_off = row.get("method") == "none"
    speedup = _row_estimate(row, "speedup")
    tied = [t for t in row.get("tied") or [] if t != label]
    return {
        "c": row.get("concurrency"),
        "depth": (0 if speculation_off else row.get("depth")) if label else None,
        "configuration": label,
        "tokens/s": format_estimate(_row_estimate(row, "tokens_per_s"), 4),
        "speedup": ("1x (speculation off)" if speculation_off else
                    format_speedup(speedup) if speedup is not None else "-") if label else "-",
        "n": row.get("repetitions") or (1 if label else None),
        "tied": ", ".join(tied) or None,
        "note": row.get("note") or (None if row.get("confirmed") or not label else "screening: one run"),
    }


OFF_STATE_COLUMNS = ["engine", "c", "served instead, vs none"]


def print_profile(profile, wide: bool = False,  # noqa: ANN001 - autotune.profiles.data.DeploymentProfile
                  off_state: dict[str, list[dict]] | None = None) -> None:
    """``autotune profiles show``: the recommendation with its 95 % intervals and n, whether the
    confirmation phase measured it, what it is tied with, and the per-concurrency table (on a narrow
    terminal without depth and n, which the configuration and the intervals already say; ``wide``:
    every column). ``off_state``: :func:`autotune.serving.off_depths.off_state_report`, a table of what
    each engine's server runs where none won."""
    tokens, tpot, speedup = (profile.estimate(name) for name in ("tokens_per_s", "tpot_ms_p50", "speedup"))
    chosen = profile.chosen_trial
    facts = {
        "study": profile.study.name, "hardware": f"{profile.hardware.name} ({profile.hardware.fingerprint})",
        "model": f"{profile.target.name} ({profile.target.fingerprint})",
        "configuration": profile.label() + (f" with draft {profile.draft.name}" if profile.draft else ""),
        "concurrency": profile.concurrency, "objective": profile.objective,
        "tokens/s": format_estimate(tokens, 4),
        "speedup vs none": "1x (baseline)" if profile.method == "none" and speedup else format_speedup(speedup),
        "TPOT p50 ms": format_estimate(tpot, 4),
        "n (repetitions)": profile.repetitions,
        "confirmed": "yes" if profile.confirmed else "no: one screening run, no interval",
        "tied within noise": ", ".join(label for label in profile.tied_with if label != profile.label()) or None,
        "from": None if chosen is None else f"{profile.chosen_phase} trial {chosen}",
    }
    print_rows([{"figure": name, "value": value} for name, value in facts.items()], ["figure", "value"],
               title=f"Deployment profile {profile.id} (95 % intervals)", wide=wide)
    console = stdout()
    if not profile.confirmed:
        console.print("not confirmed: one screening run, no interval and no paired speedup (the confirmation phase "
                      "did not run)")
    tied = [label for label in profile.tied_with if label != profile.label()]
    if tied:
        console.print(f"tied within noise at concurrency {profile.concurrency}: {profile.label()} and "
                      f"{', '.join(tied)}; {profile.label()} is the simplest to operate")
    table = [concurrency_row(row) for row in profile.per_concurrency]
    if table:
        print_rows(table, list(table[0]), title="Per concurrency: depth to serve (0: speculation off), 95 % intervals",
                   optional=("n", "depth"), wide=wide)
    off = [dict(zip(OFF_STATE_COLUMNS, (engine, state["concurrency"], state["summary"])))
           for engine, states in (off_state or {}).items() for state in states]
    if off:
        print_rows(off, OFF_STATE_COLUMNS, title="Where none won: what a speculative server runs there (not none)",
                   wide=wide)


def print_plan(plan) -> None:  # noqa: ANN001 - autotune.planning.DeploymentPlan
    """``autotune plan``: the title saying it is predicted, one row per concurrency (best
    configuration, predicted tokens/s with its 95 % interval, speedup, TPOT, memory, fit), the
    basis (acceptance, step costs, calibration), the notes and the warnings."""

    def compact(value: float) -> str:  # 47639 -> "47.6k": keeps the interval column narrow
        for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= scale:
                return f"{value / scale:.3g}{suffix}"
        return format_value(value)

    console = stdout()
    console.print(plan.title, style="bold")
    table = Table(title=f"{plan.target.name} on {plan.hardware.name}, per concurrency")
    wrapping = ("best config", "pred tok/s [95%]")  # the widest cells: on 80 columns, an interval may wrap
    for column in ("c", *wrapping, "speedup", "TPOT ms", "mem GiB", "fits"):
        table.add_column(column, justify="left" if column in ("best config", "fits") else "right",
                         no_wrap=column not in wrapping, min_width=len(column))  # headers stay whole
    for row in plan.rows:
        table.add_row(
            str(row.concurrency), row.label,
            f"{compact(row.predicted_tokens_per_s)} [{compact(row.predicted_tokens_per_s_low)}, "
            f"{compact(row.predicted_tokens_per_s_high)}]",
            f"{row.predicted_speedup:.2f}x", format_value(row.predicted_tpot_ms_p50),
            f"{row.memory_bytes / GIB:.3g}", "yes" if row.fits else f"no (> {row.memory_limit_bytes / GIB:.3g})",
        )
    console.print(table)
    for row in plan.rows:
        if row.leader:
            console.print(f"concurrency {row.concurrency}: {row.label} is within 2 % of the fastest, {row.leader}, and simpler")
    for line in plan.basis_lines() + plan.notes:
        console.print(line)
    for warning in plan.warnings:
        console.print(f"warning: {warning}", style="yellow")


CATEGORY_COLUMNS = ["category", "acceptance", "95 % interval", "prompts", "requests", "tokens/request", "share"]


def print_categories(by_category, title: str, wide: bool = False) -> None:  # noqa: ANN001 - {category: entry}
    """Acceptance length per request category with its 95 % interval (autotune.analysis.categories)."""
    from autotune.profiles.categories import category_differences, category_rows

    rows = [{"category": row["category"], "acceptance": format_value(row["acceptance_length"]),
             "95 % interval": "-" if row["low"] is None else f"[{row['low']:.3g}, {row['high']:.3g}]",
             "prompts": row["prompts"], "requests": row["requests"],
             "tokens/request": format_value(row["tokens_per_request"]), "share": f"{row['share']:.0%}"}
            for row in category_rows(by_category)]
    print_rows(rows, CATEGORY_COLUMNS, title=title, optional=("share", "tokens/request", "requests"), wide=wide)
    print_lines(category_differences(by_category))


def print_mix(mix, wide: bool = False) -> None:  # noqa: ANN001 - autotune.analysis.mix.MixFigures
    """``profiles show --mix``: the profile's figures carried over to the mix (predicted)."""
    named = ", ".join(f"{name}={share:g}" for name, share in mix.mix.items())
    measured = ", ".join(f"{name}={share:.2f}" for name, share in sorted(mix.measured_mix.items()))
    figures = mix.figures
    facts = {
        "acceptance length": f"{format_estimate(mix.acceptance_length, 4)} (measured mix: "
                             f"{mix.measured_acceptance_length:.4g})",
        "factor on tokens/s": f"{mix.factor:.4f}",
        "tokens/s": format_estimate(figures.get("tokens_per_s"), 4),
        "speedup vs none": format_speedup(figures.get("speedup")),
        "TPOT p50 ms": format_estimate(figures.get("tpot_ms_p50"), 4),
    }
    print_rows([{"figure": name, "value": value} for name, value in facts.items()], ["figure", "value"],
               title=f"PREDICTED for the mix {named} (measured on {measured})", wide=wide)
