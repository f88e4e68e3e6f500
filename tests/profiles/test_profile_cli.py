"""`autotune trials` and `autotune profiles show`: figures with their 95 % intervals and n, the phase
of every row, and what a screening-only study cannot say (no speedup, no interval)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import profile_factory as factory
from autotune.cli import cli


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, int]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'autotune.db'}"
    return url, factory.populate(url)


def run(*args: str) -> str:
    result = CliRunner(env={"COLUMNS": "250"}).invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def table_lines(output: str) -> list[list[str]]:
    """The cells of each body row of rich's tables (lines that start with │)."""
    return [[cell.strip() for cell in line.strip("│ \n").split("│")] for line in output.splitlines() if line.startswith("│")]


def test_trials_shows_phase_n_and_intervals(stored) -> None:  # noqa: ANN001
    url, _ = stored
    output = run("trials", "h100-old", "--db", url)
    header = next(line for line in output.splitlines() if "tokens/s" in line)
    assert [c.strip() for c in header.strip("┃ ").split("┃")] == [
        "#", "phase", "config", "c", "state", "n", "tokens/s", "speedup", "accept", "note"]
    rows = table_lines(output)
    screening = [r for r in rows if r[1] == "screen"]
    confirmation = [r for r in rows if r[1] == "confirm 1"]
    assert len(screening) == 61 and len(confirmation) == 25
    assert all(r[7] == "-" and "±" not in r[6] for r in screening)  # one pass: no interval, no speedup
    complete = [r for r in screening if r[4] == "complete"]
    assert all(r[5] == "1" for r in complete)
    assert next(r for r in screening if r[4] == "failed")[9] == "out of memory"
    assert all(r[5] == str(factory.ROUNDS) and "±" in r[6] for r in confirmation)
    mtp2_b4 = next(r for r in confirmation if r[2:4] == ["mtp@2", "4"])
    assert mtp2_b4[7].startswith("1.44x [1.4") and mtp2_b4[7].endswith("]")
    assert all(r[7] == "1x (baseline)" for r in confirmation if r[2] == "none")


def test_trials_json_has_every_field(stored) -> None:  # noqa: ANN001
    url, _ = stored
    rows = json.loads(run("trials", "h100-old", "--json", "--db", url))
    confirmed = [r for r in rows if r["phase"] == "confirmation"]
    assert len(rows) == 86 and len(confirmed) == 25
    row = confirmed[0]
    assert row["repetitions"] == factory.ROUNDS and set(row["intervals"]) >= {"tokens_per_s", "tpot_ms_p50"}
    assert row["extra"]["samples"] and row["extra"]["confirmation"]["run"] == 1
    assert all(r["speedup"] is None and r["intervals"] == {} and r["repetitions"] == 1 for r in rows if r["phase"] == "screening")


def test_trials_of_a_screening_only_study_say_so(stored) -> None:  # noqa: ANN001
    url, _ = stored
    output = run("trials", "cpu", "--db", url)
    assert "screening rows only: one pass each, no interval and no speedup" in output
    assert "±" not in output


def test_profiles_show_a_confirmed_profile(stored) -> None:  # noqa: ANN001
    url, ids = stored
    output = run("profiles", "show", str(ids["h100-old"]), "--db", url)
    facts = {row[0]: row[1] for row in table_lines(output) if len(row) == 2}
    assert facts["configuration"] == "mtp@2" and facts["concurrency"] == "4"
    assert facts["tokens/s"].startswith("478 ±1.")
    assert facts["speedup vs none"].startswith("1.44x [1.4")
    assert facts["n (repetitions)"] == str(factory.ROUNDS) and facts["confirmed"] == "yes"
    assert facts["tied within noise"] == "mtp@3" and facts["from"].startswith("confirmation trial ")
    assert "tied within noise at concurrency 4: mtp@2 and mtp@3; mtp@2 is the simplest to operate" in output
    per_batch = [row for row in table_lines(output) if len(row) == 8]
    assert [row[0] for row in per_batch] == [str(b) for b in factory.CONCURRENCIES]
    assert per_batch[-1][1:3] == ["0", "none"] and per_batch[-1][4] == "1x (speculation off)"
    assert per_batch[0][1:3] == ["4", "mtp@4"] and per_batch[0][4].startswith("2.04x [")
    assert per_batch[2][6] == "mtp@3"  # concurrency 4: tied


def test_profiles_show_an_unconfirmed_profile(stored) -> None:  # noqa: ANN001
    url, ids = stored
    output = run("profiles", "show", str(ids["cpu"]), "--db", url)
    facts = {row[0]: row[1] for row in table_lines(output) if len(row) == 2}
    assert facts["speedup vs none"] == "-" and facts["n (repetitions)"] == "1"
    assert facts["confirmed"] == "no: one screening run, no interval" and "±" not in facts["tokens/s"]
    assert "not confirmed: one screening run, no interval and no paired speedup" in output


def test_profiles_show_json_includes_repetitions_and_intervals(stored) -> None:  # noqa: ANN001
    url, ids = stored
    data = json.loads(run("profiles", "show", str(ids["h100-old"]), "--json", "--db", url))
    assert data["repetitions"] == factory.ROUNDS and data["confirmed"] is True
    assert data["intervals"]["speedup"]["low"] < data["speedup"] < data["intervals"]["speedup"]["high"]
    assert data["chosen_phase"] == "confirmation" and data["tied_with"] == ["mtp@2", "mtp@3"]
    assert all("speedup_low" in row and "repetitions" in row for row in data["per_concurrency"])
    unconfirmed = json.loads(run("profiles", "show", str(ids["cpu"]), "--json", "--db", url))
    assert (unconfirmed["repetitions"], unconfirmed["intervals"], unconfirmed["confirmed"]) == (1, {}, False)


def test_profiles_show_says_what_a_server_runs_where_none_won(stored, tmp_path) -> None:  # noqa: ANN001
    """The off state per serving engine: unmeasured for a study of the embedded engine; the same
    study imported as a TensorRT-LLM one carries its confirmed mtp@1 row against none, with the interval."""
    url, ids = stored
    output = run("profiles", "show", str(ids["h100-old"]), "--db", url)
    off = {row[0]: row[1:] for row in table_lines(output) if len(row) == 3}
    assert off["trtllm"] == ["16", "draft length 1: unmeasured (the profile was measured on the embedded engine, not "
                                   "TensorRT-LLM)"]
    assert off["vllm"][1].startswith("draft length 1: unmeasured (")
    data = json.loads(run("profiles", "show", str(ids["h100-old"]), "--json", "--db", url))
    assert [state["measured"] for states in data["off_state"].values() for state in states] == [False, False]

    run("export", str(ids["h100-old"]), "--format", "json", "-o", str(tmp_path / "p.json"), "--db", url)
    document = json.loads((tmp_path / "p.json").read_text())
    document["profile"]["study"].update(engine="trtllm", name="h100-trtllm")
    (tmp_path / "trt.json").write_text(json.dumps(document))
    imported = json.loads(run("profiles", "import", str(tmp_path / "trt.json"), "--json", "--db", url))["id"]
    (state,) = json.loads(run("profiles", "show", str(imported), "--json", "--db", url))["off_state"]["trtllm"]
    assert (state["concurrency"], state["depth"], state["configuration"]) == (16, 1, "mtp@1")
    gain = state["vs_none"]
    assert gain["low"] < gain["value"] < gain["high"] < 1 and gain["n"] == factory.ROUNDS
    assert state["summary"] == f"draft length 1: mtp@1 {gain['value']:.2f}x [{gain['low']:.2f}, {gain['high']:.2f}] " \
                               f"vs none (n={factory.ROUNDS})"


def test_export_to_a_dash_writes_standard_output_and_no_file(stored, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    url, ids = stored
    monkeypatch.chdir(tmp_path)
    run("export", str(ids["h100-old"]), "--format", "json", "-o", str(tmp_path / "p.json"), "--db", url)
    printed = run("export", str(ids["h100-old"]), "--format", "json", "-o", "-", "--db", url)
    assert printed == (tmp_path / "p.json").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]  # no file named "-", nothing under profiles/


def test_the_recommended_configuration_is_not_tied_with_itself_under_its_draft_label(stored) -> None:  # noqa: ANN001
    # The tuner stores a named draft's rows as draft:<name>@K, the profile's own label says draft@K.
    from dataclasses import replace

    from autotune import api

    url, ids = stored
    profile = api.show_profile(url, ids["h100-old"])
    own = profile.label().replace("@", ":autotune-byte-draft@")
    named = replace(profile, details={**profile.details, "label": f"{own} c{profile.concurrency}",
                                      "tied_with": [own, "ngram@2"]})
    assert named.tied_others == ["ngram@2"]
    assert replace(profile, details={**profile.details, "tied_with": [profile.label()]}).tied_others == []
