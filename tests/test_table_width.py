"""Every table the CLI prints fits an 80-column terminal with its headers whole (short hardware
labels, fewer columns), and ``--wide`` shows every column at its natural width.

The database holds the profile factory's studies (H100 and CPU, confirmed and screening-only) and
the example profile this repository ships (a real CPU study: long study name, notes on its trials).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import profile_factory as factory
from autotune import render
from autotune.cli import cli
from autotune.profiles import transfer
from planning.test_plan import TARGET
from planning.test_plan import url as plan_url  # noqa: F401 - the plan's database fixture
from report.test_report_prediction import url as predicted_url  # noqa: F401 - a study whose trials have predictions

EXAMPLE_PROFILE = next((Path(__file__).parent.parent / "profiles").glob("*.json"))
BOX = "┏┃┡│└"  # the characters rich's table lines start with


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('tables') / 'autotune.db'}"
    ids = factory.populate(url)
    imported = CliRunner().invoke(cli, ["profiles", "import", str(EXAMPLE_PROFILE), "--db", url, "--json"])
    assert imported.exit_code == 0, imported.output
    example = json.loads(imported.output)
    return {"db": url, "study": example["study"], "confirmed": str(ids["h100-old"]), "example": str(example["id"])}


def run(*args: str, columns: int = 80) -> str:
    result = CliRunner(env={"COLUMNS": str(columns)}).invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def headers(output: str) -> list[list[str]]:
    """The header cells of each table in ``output``."""
    return [[cell.strip() for cell in line.strip("┃").split("┃")] for line in output.splitlines()
            if line.startswith("┃")]


def assert_fits(output: str, known: set[str]) -> None:
    table_lines = [line for line in output.splitlines() if line[:1] and line[0] in BOX]
    assert table_lines, output
    assert max(map(len, table_lines)) <= 80, "\n".join(line for line in table_lines if len(line) > 80)
    for header in headers(output):
        assert set(header) <= known, f"cut or unknown headers: {set(header) - known}"
    assert "…" not in output  # nothing is cut short: long cells fold onto the next line


PER_BATCH = {"c", "depth", "configuration", "tokens/s", "speedup", "n", "tied", "note"}
TABLES = {
    "profiles list": (("profiles", "list"), set(render.PROFILE_COLUMNS)),
    "profiles best": (("profiles", "best", "--model", "tiny-target", "--hardware", "aaaa111122223333",
                       "--concurrency", "2"),
                      set(render.PROFILE_COLUMNS) | {"method", "depth", "concurrency", "tokens_per_s", "tpot_ms_p50",
                                                     "speedup"}),
    "profiles show": (("profiles", "show", "{confirmed}"), {"figure", "value"} | PER_BATCH | set(render.OFF_STATE_COLUMNS)),
    "profiles show example": (("profiles", "show", "{example}"),
                              {"figure", "value"} | PER_BATCH | set(render.OFF_STATE_COLUMNS)),
    "studies": (("studies",), set(render.STUDY_COLUMNS)),
    "trials": (("trials", "{study}"), set(render.TRIAL_COLUMNS)),
    "trials confirmed": (("trials", "h100-old"), set(render.TRIAL_COLUMNS)),
}


@pytest.mark.parametrize("name", TABLES)
def test_tables_fit_80_columns_with_whole_headers(stored: dict[str, str], name: str) -> None:
    args, known = TABLES[name]
    assert_fits(run(*(a.format(**stored) for a in args), "--db", stored["db"]), known)


def test_profiles_list_uses_short_hardware_labels_and_keeps_the_essentials(stored: dict[str, str]) -> None:
    output = run("profiles", "list", "--db", stored["db"])
    assert headers(output)[0] == ["id", "hardware", "model", "config", "c", "tokens/s", "speedup"]
    assert "H100" in output and "CPU 2c" in output and "NVIDIA" not in output


@pytest.mark.parametrize(
    ("args", "columns"),
    [
        (("profiles", "list"), render.PROFILE_COLUMNS),
        (("studies",), render.STUDY_COLUMNS),
        (("trials", "{study}"), render.TRIAL_COLUMNS),
    ],
)
def test_wide_shows_every_column_unfolded(stored: dict[str, str], args: tuple[str, ...], columns: list[str]) -> None:
    output = run(*(a.format(**stored) for a in args), "--wide", "--db", stored["db"])
    assert headers(output)[0] == columns
    assert "…" not in output
    if "hardware" in columns:  # the full name, on one line
        assert "cpu: AMD EPYC (2 cores, 24 GiB)" in output or "1x NVIDIA H100 80GB HBM3" in output


def test_wide_profile_show_has_every_per_batch_column(stored: dict[str, str]) -> None:
    output = run("profiles", "show", stored["confirmed"], "--wide", "--db", stored["db"])
    assert headers(output)[-1] == render.OFF_STATE_COLUMNS  # where none won: after the per-batch table
    assert headers(output)[-2] == ["c", "depth", "configuration", "tokens/s", "speedup", "n", "tied", "note"]


def test_a_wide_terminal_keeps_every_column_without_wide(stored: dict[str, str]) -> None:
    output = run("profiles", "list", "--db", stored["db"], columns=250)
    assert headers(output)[0] == render.PROFILE_COLUMNS


def test_plan_fits_80_columns(plan_url: str) -> None:  # noqa: F811 - the imported fixture
    assert_fits(run("plan", "--hardware", "h200", "--model", TARGET, "--db", plan_url),
                {"c", "best config", "pred tok/s [95%]", "speedup", "TPOT ms", "mem GiB", "fits"})


def test_trials_with_predictions_fit_80_columns(predicted_url: str) -> None:  # noqa: F811 - the imported fixture
    """On 80 columns the prediction columns go (after accept and n); --wide brings every one back."""
    assert_fits(run("trials", "predicted", "--db", predicted_url), set(render.TRIAL_COLUMNS))
    wide = run("trials", "predicted", "--wide", "--db", predicted_url)
    at = render.TRIAL_COLUMNS.index("tokens/s") + 1
    assert headers(wide)[0] == render.TRIAL_COLUMNS[:at] + render.PREDICTION_COLUMNS + render.TRIAL_COLUMNS[at:]


def test_preflight_fits_80_columns(tmp_path: Path) -> None:
    import hf_model_factory as hf

    target = hf.write_model(tmp_path / "target", hf.llama_config())
    draft = hf.write_model(tmp_path / "draft", hf.llama_config(vocab_size=300))  # a mismatch: long messages
    result = CliRunner(env={"COLUMNS": "80"}).invoke(cli, ["preflight", "--target", str(target), "--draft", str(draft)])
    assert_fits(result.output, {"status", "name", "subject", "message"})


def test_probe_fits_80_columns() -> None:
    assert_fits(run("probe", "--quick", "--no-store"), {"metric", "unit", "measured", "peak", "ratio"})


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("1x NVIDIA H200", "H200"),
        ("8x NVIDIA H100 80GB HBM3", "8x H100"),
        ("1x NVIDIA A10 + 1x NVIDIA L4", "A10+L4"),
        ("1x NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA H200 SXM 141GB", "H200"),
        ("cpu: AMD EPYC 7B13 (2 cores, 24 GiB)", "CPU 2c"),
        ("test-gpu", "test-gpu"),
    ],
)
def test_short_hardware_labels(name: str, label: str) -> None:
    assert render.short_hardware(name) == label



@pytest.mark.parametrize("name", ["study [/] closed", "[bold red]loud[/bold red] :warning:", "[link=x]y"])
def test_names_are_shown_as_written_not_as_markup(tmp_path: Path, name: str) -> None:
    """A name with rich markup or an emoji code is printed literally by every table ("[/]" was a
    MarkupError, an internal error; "[bold red]" restyled the row and ":warning:" became an emoji)."""
    url = f"sqlite:///{tmp_path / 'autotune.db'}"
    source = tmp_path / "hostile.json"
    source.write_text(transfer.dumps(factory.hostile_profile(name)))
    stored_id = json.loads(run("profiles", "import", str(source), "--db", url, "--json"))["id"]
    for args in (("profiles", "list"), ("profiles", "show", str(stored_id)), ("studies",)):
        output = run(*args, "--db", url, "--wide", columns=250)
        assert name in output, (args, output)
