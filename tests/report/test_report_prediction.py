"""Predicted against measured, as the user sees it: `autotune trials` shows the performance model's
prediction (tokens/s with its 95 % interval) and its error next to what each screening trial
measured, and the report adds the predicted-versus-measured figure and table columns; studies
without predictions look as before (no column, no figure, no crash)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from matplotlib.container import ErrorbarContainer

import profile_factory as factory
from autotune import render, report
from autotune.analysis.prediction import prediction_error
from autotune.cli import cli
from autotune.store import open_database, results

# The model's prediction of each predicted screening trial, as a factor of what it then measured,
# in trial order. Errors: |+7.8 %|, 10, 20, 5, 3, 30, 0, 15, 12 %: the median is 10 %.
FACTORS = (1.078, 0.9, 1.2, 1.05, 0.97, 1.3, 1.0, 0.85, 1.12)
WIDTH = 1.25  # the interval: value / 1.25 to value * 1.25, so only the +30 % one misses the measurement
UNPREDICTED = 1  # the first trial ran before the model could predict


def prediction(value: float, source: str = "timed") -> dict:
    """A prediction as the tuner stores it (Prediction.to_dict())."""
    return {"tokens_per_s": {"value": value, "low": value / WIDTH, "high": value * WIDTH},
            "tpot_ms_p50": {"value": 4.1, "low": 3.3, "high": 5.2}, "omega": 2.4, "sigma": 0.11,
            "sigmas": {"acceptance": 0.01, "cost": 0.03, "model": 0.1}, "correction": 1.04, "source": source}


def predicted_study(session, name: str, *, failed_only: bool = False) -> None:  # noqa: ANN001
    """A confirmed study of none and MTP at concurrency levels 1 and 4 (10 screening trials, one failed,
    then a confirmation run) whose screening trials after the first were predicted before they
    ran (one by the roofline), the failed one included; ``failed_only``: only the failed one was."""
    hw, target = factory.hardware(session), factory.model(session, "tiny-target", "tttt000011112222")
    profile = factory.study(session, name, hw, target, methods=("none", "mtp"), concurrencies=(1, 4), confirm=True)
    screening = sorted((m for m in profile.study.measurements if m.phase == "screening"), key=lambda m: m.trial_number)
    complete = [m for m in screening if m.state == "complete"]
    assert len(complete) == UNPREDICTED + len(FACTORS)
    if not failed_only:
        for i, (m, factor) in enumerate(zip(complete[UNPREDICTED:], FACTORS)):
            m.prediction = prediction(m.tokens_per_s * factor, "roofline" if i == 3 else "timed")
    # A trial stored through the store's writer with its prediction: it failed, so it measured nothing.
    results.record_trial(session, profile.study_id, results.TrialEntry(
        trial_number=len(screening), method="mtp", depth=4, concurrency=4,
                         state="failed", reason="worker died", prediction=prediction(900.0)))


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('prediction-db') / 'autotune.db'}"
    factory.populate(url)  # studies without predictions: h100-old, cpu, ...
    with open_database(url) as database, database.session() as session:
        predicted_study(session, "predicted")
    with open_database(url) as database, database.session() as session:
        predicted_study(session, "failed-predicted", failed_only=True)
    return url


def run(*args: str, columns: int = 250) -> str:
    result = CliRunner(env={"COLUMNS": str(columns)}).invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def header(output: str) -> list[str]:
    line = next(line for line in output.splitlines() if "tokens/s" in line and "┃" in line)
    return [c.strip() for c in line.strip("┃ ").split("┃")]


def table_lines(output: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("│ \n").split("│")]
            for line in output.splitlines() if line.startswith("│")]


def test_trials_show_the_prediction_and_its_error(url: str) -> None:
    output = run("trials", "predicted", "--db", url)
    columns = header(output)
    assert columns == ["#", "phase", "config", "c", "state", "n", "tokens/s", "pred", "err", "speedup", "accept",
                       "note"]
    rows = [dict(zip(columns, cells)) for cells in table_lines(output)]
    screening = [r for r in rows if r["phase"] == "screen"]
    predicted = [r for r in screening if r["pred"] != "-"]
    assert len(predicted) == len(FACTORS) + 1  # the failed one was predicted too
    assert [r["err"] for r in predicted if r["state"] == "complete"] == [
        "+7.8%", "-10.0%", "+20.0%", "+5.0%", "-3.0%", "+30.0%", "+0.0%", "-15.0%", "+12.0%"]
    first = predicted[0]
    value = float(first["tokens/s"].replace(",", "")) * FACTORS[0]
    assert first["pred"] == f"{value:.3g} [{value / WIDTH:.3g},{value * WIDTH:.3g}]"  # under 100 tokens/s: 3 digits
    failed = next(r for r in predicted if r["state"] == "failed")
    assert failed["pred"] == "900 [720,1125]" and failed["err"] == "-" and failed["note"] == "worker died"
    # Where one of the two is missing: dashes (before the model predicted, confirmation rows).
    unpredicted = [r for r in rows if r["pred"] == "-"]
    assert len(unpredicted) == UNPREDICTED + sum(r["phase"] != "screen" for r in rows) + 1  # + factory's failed one
    assert all(r["err"] == "-" for r in unpredicted)
    assert any(r["phase"].startswith("confirm") for r in unpredicted)
    # Then the study's builds (this factory's rows record none) and its edges (its space names no depth range).
    assert output.splitlines()[-3:] == [
        "pred: tokens/s the performance model predicted before the trial ran [95 % interval]; "
        "err: predicted / measured - 1",
        "prediction error: median |err| 10.0% over 9 screening trials, 8 of 9 measured inside the interval",
        "Builds (engine builds or model loads): 0 (0 in screening, 0 in confirmation)."]


def test_trials_table_fits_120_columns(url: str) -> None:
    output = run("trials", "predicted", "--db", url, columns=120)
    assert max(len(line) for line in output.splitlines()) <= 120
    cells = [dict(zip(header(output), c)) for c in table_lines(output)]
    assert any(re.fullmatch(r"\d+ \[\d+,\d+\]", r["pred"]) for r in cells)  # not wrapped over two lines


def test_studies_without_predictions_keep_their_columns(url: str) -> None:
    output = run("trials", "h100-old", "--db", url)
    assert header(output) == render.TRIAL_COLUMNS
    assert "pred:" not in output
    failed_only = run("trials", "failed-predicted", "--db", url)
    assert "pred" in header(failed_only) and "median |err|" not in failed_only  # nothing measured to compare


def test_trials_json_has_the_prediction(url: str) -> None:
    rows = json.loads(run("trials", "predicted", "--json", "--db", url))
    screening = [r for r in rows if r["phase"] == "screening" and r["state"] == "complete"]
    assert [r["prediction"] is None for r in screening[:UNPREDICTED]] == [True] * UNPREDICTED
    stored = screening[UNPREDICTED]["prediction"]
    assert stored["tokens_per_s"]["value"] == pytest.approx(screening[UNPREDICTED]["tokens_per_s"] * FACTORS[0])
    assert stored["source"] == "timed" and stored["sigmas"]["model"] == 0.1 and "tpot_ms_p50" in stored
    assert all(r["prediction"] is None for r in rows if r["phase"] == "confirmation")
    assert all(r["builds"] == 0 and r["edges"] == [] for r in rows)


@pytest.fixture(scope="module")
def written(url: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    html_path = report.write_report(url, "predicted", tmp_path_factory.mktemp("report") / "out")
    return html_path, html_path.read_text()


def test_report_draws_predicted_against_measured(url: str, written) -> None:  # noqa: ANN001
    html_path, html = written
    png = html_path.parent / "predicted_vs_measured.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 15_000
    assert "href='predicted_vs_measured.png'" in html
    data = report.load_study(url, "predicted")
    figure = report.figures(data)["predicted_vs_measured"]
    ax = figure.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ("median |predicted/measured - 1| = 10.0% over n = 9 screening trials,\n8 of 9 measured inside"
            in ax.get_title())
    containers = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    labels = {c.get_label() for c in containers}
    # The study has both kinds of prediction: each is named (roofline ones hollow).
    assert labels == {"none (baseline), timed prediction", "MTP, timed prediction", "MTP, roofline prediction"}
    points, segments = [], []
    for c in containers:
        line, _, bars = c.lines
        points += list(zip(*line.get_data()))
        segments += [s for collection in bars for s in collection.get_segments()]
    checked = sorted((m.tokens_per_s, m.prediction["tokens_per_s"]) for m in data.measurements
                     if m.prediction and m.complete)
    assert [c for point in sorted(points) for c in point] == pytest.approx(
        [c for x, p in checked for c in (x, p["value"])])
    assert [c for s in sorted(segments, key=lambda s: s[0][0]) for c in (s[0][0], s[0][1], s[1][1])] == pytest.approx(
        [c for x, p in checked for c in (x, p["low"], p["high"])])
    diagonal = next(line for line in ax.get_lines() if line.get_label() == "predicted = measured")
    xs, ys = diagonal.get_data()
    assert list(xs) == list(ys)


def test_report_tables_and_note_name_the_prediction(written) -> None:  # noqa: ANN001
    _, html = written
    trials = html[html.index("<h2>All trials</h2>"):]
    assert "<th>tokens/s</th><th>predicted tokens/s</th><th>error</th><th>TPOT p50 (ms)</th>" in trials
    assert "<td>+7.8%</td>" in trials and "<td>-10.0%</td>" in trials
    assert "<td>900 [720, 1,125]</td><td>&ndash;</td>" in trials  # the failed trial: predicted, nothing measured
    assert re.search(r"<td>\d[\d,.]* \[\d[\d,.]*, \d[\d,.]*\]</td><td>\+30\.0%</td>", trials)
    assert "<td class='text'>worker died</td>" in trials  # the note column is still the last, text one
    assert ("The performance model predicted 9 screening trials before they ran: median absolute error 10.0% "
            "(|predicted / measured - 1|); 8 of 9 measured inside the predicted 95 % interval.") in html


def test_report_without_predictions_has_no_figure_and_no_columns(url: str, tmp_path: Path) -> None:
    data = report.load_study(url, "cpu")
    assert prediction_error(data.measurements) == (None, 0)
    assert "predicted_vs_measured" not in report.figures(data)
    html = report.render_html(data, {})
    assert "predicted_vs_measured" not in html and "predicted tokens/s" not in html
    assert "performance model" not in html


def test_report_with_predictions_but_nothing_to_compare(url: str, tmp_path: Path) -> None:
    html_path = report.write_report(url, "failed-predicted", tmp_path / "out")
    html = html_path.read_text()
    assert not (tmp_path / "out" / "predicted_vs_measured.png").exists()
    assert "predicted_vs_measured" not in html
    assert "<th>predicted tokens/s</th>" in html and "<td>900 [720, 1,125]</td>" in html
    assert "no screening trial with one completed: nothing to compare" in html
