"""``autotune studies`` and ``autotune trials``: a line per study, a line per stored trial."""

from __future__ import annotations

from collections.abc import Sequence

from autotune.render.console import print_rows, stdout
from autotune.render.formats import format_error, format_estimate, format_prediction, format_speedup, short_hardware

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


# Short headers: the table must stay readable on an 80-column terminal.
TRIAL_COLUMNS = ["#", "phase", "config", "c", "state", "n", "tokens/s", "speedup", "accept", "note"]
# Added after tokens/s when a trial of the study has a prediction (older studies: the columns above only).
PREDICTION_COLUMNS = ["pred", "err"]
# With them, on a 120-column terminal: these short cells stay on one line, config, speedup and note wrap.
UNWRAPPED_TRIAL_COLUMNS = ("#", "phase", "c", "state", "n", "tokens/s", *PREDICTION_COLUMNS, "accept")


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
