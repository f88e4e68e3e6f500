"""The study report: real PNGs next to a self-contained HTML page that embeds exactly those PNGs;
confirmed figures drawn with their 95 % intervals as error bars and written with ± and n."""

from __future__ import annotations

import base64
import re
import struct
from pathlib import Path

import pytest
from matplotlib.container import ErrorbarContainer

import profile_factory as factory
from autotune import report
from autotune.analysis import decision
from autotune.profiles import ProfileNotFoundError
from autotune.store import open_database

PLOTS = {"throughput_vs_concurrency", "speedup_vs_depth", "acceptance_by_position", "pareto_front", "speedup_by_method"}


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (and proof that it is a PNG)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('report-db') / 'autotune.db'}"
    factory.populate(url)
    return url


@pytest.fixture(scope="module")
def written(populated: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One report of the standard h100-old study, confirmed (rendering takes a few seconds: done once)."""
    html_path = report.write_report(populated, "h100-old", tmp_path_factory.mktemp("report") / "out")
    return html_path, html_path.read_text()


def error_containers(figure) -> list[ErrorbarContainer]:  # noqa: ANN001
    return [c for ax in figure.axes for c in ax.containers if isinstance(c, ErrorbarContainer)]


def bar_segments(container: ErrorbarContainer) -> list:
    """The (x, low) - (x, high) segments of a container's vertical error bars."""
    _, _, bars = container.lines
    return [segment for collection in bars for segment in collection.get_segments()]


def test_writes_every_plot_and_the_page(written) -> None:  # noqa: ANN001
    html_path, _ = written
    assert html_path.name == "report.html"
    pngs = {p.stem: p.read_bytes() for p in html_path.parent.glob("*.png")}
    assert set(pngs) == PLOTS
    for name, data in pngs.items():
        width, height = png_size(data)
        assert width >= 600 and height >= 300, name
        assert len(data) > 15_000, name  # drawn content, not an empty canvas
    assert sorted(p.name for p in html_path.parent.iterdir()) == sorted([f"{n}.png" for n in PLOTS] + ["report.html"])


def test_page_embeds_the_same_pngs_and_needs_nothing_else(written) -> None:  # noqa: ANN001
    html_path, html = written
    embedded = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    assert sorted(base64.b64decode(e) for e in embedded) == sorted(p.read_bytes() for p in html_path.parent.glob("*.png"))
    assert not re.search(r"(src|href)=['\"]https?:", html)  # no external resources
    assert "<script" not in html


def test_page_states_the_profile_and_the_verdict_with_numbers(written) -> None:  # noqa: ANN001
    _, html = written
    assert "<h1>Study h100-old</h1>" in html
    assert "<td class='text'>mtp@2</td>" in html  # the chosen profile (tied with mtp@3, simpler)
    verdict = re.search(r"<p class='verdict'>(.*?)</p>", html).group(1)
    # The tuner's verdict per method, in the words its summary uses (summary.verdict_lines).
    assert verdict.split("<br>") == [
        "mtp: best 2.04x [2.00, 2.08] (mtp@4 c1, acceptance 80%, +63.4 MiB).",
        "draft:tiny-draft: best 1.28x [1.25, 1.31] (draft:tiny-draft@2 c1, acceptance 65%, +528.0 MiB).",
        "ngram: best 1.39x [1.35, 1.42] (ngram@2 c1, acceptance 40%, +0.0 MiB).",
    ]
    assert html.count("<tr class='failed'>") == 1 and "out of memory" in html


def test_study_without_profile_or_complete_trials(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'autotune.db'}"
    with open_database(url) as database, database.session() as session:
        hw, target = factory.hardware(session), factory.model(session, "t", "t" * 16)
        profile = factory.study(session, "all-failed", hw, target, methods=("none",), concurrencies=(1,))
        for trial in profile.study.measurements:
            trial.state, trial.tokens_per_s = "failed", None
        session.delete(profile)
    html_path = report.write_report(url, "all-failed", tmp_path / "out")
    html = html_path.read_text()
    assert "has not written a deployment profile" in html and "No complete trial: nothing to plot." in html
    assert "No speculative method completed a trial in this study." in html
    assert list((tmp_path / "out").glob("*.png")) == []


def test_rewrites_an_earlier_report_and_finds_the_study_by_id(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'autotune.db'}"
    with open_database(url) as database, database.session() as session:
        hw, target = factory.hardware(session), factory.model(session, "t", "t" * 16)
        study_id = factory.study(session, "small", hw, target, methods=("none", "mtp"), concurrencies=(1, 2)).study_id
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").write_text("old")
    html = report.write_report(url, str(study_id), out).read_text()
    assert "<h1>Study small</h1>" in html
    assert re.search(r"<p class='verdict'>mtp: [^<]*</p>", html)  # the one speculative method measured


def test_unknown_study(sqlite_url: str, tmp_path: Path) -> None:
    factory.populate(sqlite_url)
    with pytest.raises(ProfileNotFoundError, match="no study 'nope' is stored .newest: other, cpu"):
        report.write_report(sqlite_url, "nope", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_throughput_plot_draws_the_confirmed_intervals(populated: str) -> None:
    data = report.load_study(populated, "h100-old")
    figure = report.figures(data)["throughput_vs_concurrency"]
    containers = {c.get_label(): c for c in error_containers(figure)}
    assert set(containers) == {"none (baseline)", "MTP", "draft model (tiny-draft)", "n-gram"}
    best = decision.best_by_concurrency(m for m in decision.deciding_rows(data.measurements) if m.method == "mtp")
    segments = bar_segments(containers["MTP"])
    assert len(segments) == len(best) == len(factory.CONCURRENCIES)
    for (start, end), row in zip(segments, best.values()):
        tokens = row.estimate("tokens_per_s")
        assert start[0] == end[0] == row.concurrency
        assert (start[1], end[1]) == pytest.approx((tokens.low, tokens.high))
        assert tokens.low < row.tokens_per_s < tokens.high


def test_speedup_plots_draw_the_paired_intervals(populated: str) -> None:
    data = report.load_study(populated, "h100-old")
    plots = report.figures(data)
    by_depth = error_containers(plots["speedup_vs_depth"])
    assert by_depth and all(c.has_yerr for c in by_depth)
    rows = [m for m in decision.deciding_rows(data.measurements) if m.method != "none"]
    intervals = {(round(e.low, 9), round(e.high, 9)) for m in rows if (e := decision.speedup_estimate(m))}
    drawn = {(round(a[1], 9), round(b[1], 9)) for c in by_depth for a, b in bar_segments(c)}
    assert drawn == intervals  # every confirmed speculative row, with its own interval
    bars = error_containers(plots["speedup_by_method"])  # bar() keeps its error bars in an ErrorbarContainer too
    verdicts = [v for v in report.method_verdicts(data) if v.method != "none"]
    assert len(bars) == len(verdicts) == 3
    for container, verdict in zip(bars, verdicts):  # each method's verdict, with its intervals
        drawn = sorted((round(a[1], 9), round(b[1], 9)) for a, b in bar_segments(container))
        assert drawn == sorted((round(e["speedup_low"], 9), round(e["speedup_high"], 9)) for e in verdict.by_concurrency)


def test_a_screening_only_study_has_no_error_bars_and_no_speedup_plot(populated: str, tmp_path: Path) -> None:
    data = report.load_study(populated, "cpu")
    plots = report.figures(data)
    assert {"speedup_vs_depth", "speedup_by_method"}.isdisjoint(plots)
    assert {"throughput_vs_concurrency", "pareto_front"} <= set(plots)
    assert all(not bar_segments(c) for c in error_containers(plots["throughput_vs_concurrency"]))
    assert report.error_bars([None, data.measurements[0].estimate("tokens_per_s")]) is None
    html = report.write_report(populated, "cpu", tmp_path / "out").read_text()
    assert "This study was only screened" in html and "no (one screening run)" in html
    assert "±" not in html and "confirmation" not in html.split("<h2>All trials</h2>")[1]


def test_page_shows_intervals_n_ties_and_phases(written) -> None:  # noqa: ANN001
    _, html = written
    profile = re.search(r"<h2>Deployment profile</h2>\n(.*?)</table>", html, re.S).group(1)
    assert re.search(r"<td>478 ±1\.\d%</td>", profile) and re.search(r"<td>1\.44x \[1\.4\d, 1\.4\d\]</td>", profile)
    assert f"<td>{factory.ROUNDS}</td>" in profile and "<td class='text'>yes</td>" in profile
    assert "mtp@2 and mtp@3 are within noise of each other" in html
    per_batch = html.split("<h2>Best configuration per concurrency</h2>")[1].split("</table>")[0]
    assert per_batch.count("±") == len(factory.CONCURRENCIES)
    assert "<td>16</td><td>0</td><td class='text'>none</td>" in per_batch  # depth 0: speculation off
    trials = html.split("<h2>All trials</h2>")[1]
    assert trials.count("<td class='text'>confirmation 1</td>") == 25
    assert trials.count("<td class='text'>screening</td>") == 61
    assert trials.index("confirmation 1") > trials.rindex("<td class='text'>screening</td>")
