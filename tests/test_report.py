"""The study report: real PNGs next to a self-contained HTML page that embeds exactly those PNGs."""

from __future__ import annotations

import base64
import re
import struct
from pathlib import Path

import pytest

import profile_factory as factory
from autotune import report
from autotune.profiles import ProfileNotFoundError
from autotune.store import open_database

PLOTS = {"throughput_vs_batch_size", "speedup_vs_depth", "acceptance_by_position", "pareto_front", "mtp_vs_draft"}


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (and proof that it is a PNG)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One report of the standard h100-old study (rendering takes a few seconds: done once)."""
    folder = tmp_path_factory.mktemp("report")
    url = f"sqlite:///{folder / 'autotune.db'}"
    factory.populate(url)
    html_path = report.write_report(url, "h100-old", folder / "out")
    return html_path, html_path.read_text()


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
    assert "<td class='text'>mtp@3</td>" in html  # the chosen profile
    verdict = re.search(r"<p class='verdict'>(.*?)</p>", html).group(1)
    assert verdict.startswith("MTP wins: 1.38x versus 1.03x geometric-mean speedup over batch sizes 1-16")
    assert "memory +3% over the baseline" in verdict and "memory +25% over the baseline" in verdict
    assert "beats the baseline at 4 of 5 batch sizes" in verdict
    assert html.count("<tr class='failed'>") == 1 and "out of memory" in html


def test_study_without_profile_or_complete_trials(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'autotune.db'}"
    with open_database(url) as database, database.session() as session:
        hw, target = factory.hardware(session), factory.model(session, "t", "t" * 16)
        profile = factory.study(session, "all-failed", hw, target, methods=("none",), batch_sizes=(1,))
        for trial in profile.study.measurements:
            trial.state, trial.tokens_per_s = "failed", None
        session.delete(profile)
    html_path = report.write_report(url, "all-failed", tmp_path / "out")
    html = html_path.read_text()
    assert "has not written a deployment profile" in html and "No complete trial: nothing to plot." in html
    assert "Neither MTP nor a draft model was measured" in html
    assert list((tmp_path / "out").glob("*.png")) == []


def test_rewrites_an_earlier_report_and_finds_the_study_by_id(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'autotune.db'}"
    with open_database(url) as database, database.session() as session:
        hw, target = factory.hardware(session), factory.model(session, "t", "t" * 16)
        study_id = factory.study(session, "small", hw, target, methods=("none", "mtp"), batch_sizes=(1, 2)).study_id
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").write_text("old")
    html = report.write_report(url, str(study_id), out).read_text()
    assert "<h1>Study small</h1>" in html
    assert "Only MTP was measured" in html


def test_unknown_study(sqlite_url: str, tmp_path: Path) -> None:
    factory.populate(sqlite_url)
    with pytest.raises(ProfileNotFoundError, match="no study 'nope' is stored .newest: other, cpu"):
        report.write_report(sqlite_url, "nope", tmp_path / "out")
    assert not (tmp_path / "out").exists()
