"""The study report's HTML page: one self-contained file, the plots embedded as data URIs. Besides
the plots it gives the deployment profile, the per-method verdict
(:func:`autotune.analysis.decision.method_verdicts`, in the words the tuner's summary uses), the
per-concurrency table and every trial (with its prediction, where one was made). Confirmation rows
carry 95 % intervals, written as ``±`` / ``[low, high]`` with their n. Every value read from the
database is escaped (:class:`Html`)."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

from autotune import __version__
from autotune.analysis import decision, prediction
from autotune.analysis.intervals import Estimate
from autotune.analysis.summary import verdict_lines
from autotune.profiles import analysis
from autotune.profiles.data import DeploymentProfile, utc_iso
from autotune.render import format_error, format_estimate, format_speedup, table_estimate
from autotune.report.study import StudyData, confirmed, method_verdicts
from autotune.store.results import TrialRow

if TYPE_CHECKING:
    from autotune.validation.results import ValidationResult

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
        "measured paired with the baseline in the same rounds.</p>" if confirmed(done) else
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
    tied = profile.tied_others
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
    """The verdict in the words of the tuner's summary (:func:`autotune.analysis.summary.verdict_lines`),
    then each method's best configuration at every concurrency it was measured at."""
    lines = verdict_lines(verdicts)
    if not lines:
        return "<p class='verdict'>No speculative method completed a trial in this study.</p>"
    rows = []
    for verdict in verdicts:
        if verdict.method == decision.BASELINE:
            continue
        for entry in verdict.by_concurrency:
            rows.append([verdict.name, entry["concurrency"], entry["depth"], _num(entry["tokens_per_s"]),
                         _speedup(table_estimate(entry, "speedup")), entry["repetitions"], _num(entry["acceptance_rate"]),
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
                     _estimate(table_estimate(r, "tokens_per_s")), _speedup(table_estimate(r, "speedup"), baseline),
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
