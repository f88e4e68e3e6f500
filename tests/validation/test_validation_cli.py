"""``autotune validate`` on bad input (no vLLM needed): one line on stderr, exit 2, nothing stored,
nothing started; and its --help. ``profiles show`` (text and --json) and the report with a stored
validation."""

from __future__ import annotations

import json
import socket
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text

import profile_factory as factory
from autotune.cli import cli
from autotune.store import open_database
from autotune.validation.runner import store_validation
import validation_support
from validation_support import a_result


def run(*args: str):  # noqa: ANN201 - click's Result
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def stored_profile(url: str, folder: Path, target_folder: bool = True, draft_folder: bool = True) -> int:
    """A none-vs-draft profile whose model folders are under ``folder`` (made with a config.json, or not)."""
    paths = {role: folder / f"autotune-byte-{role}" for role in ("target", "draft")}
    for role, wanted in (("target", target_folder), ("draft", draft_folder)):
        if wanted:
            paths[role].mkdir(parents=True)
            (paths[role] / "config.json").write_text("{}")
    return validation_support.stored_profile(url, paths["target"], paths["draft"], "validate-cli")


def validations_stored(url: str) -> int:
    with create_engine(url).connect() as connection:
        return connection.execute(text("SELECT count(*) FROM autotune_validation_runs")).scalar()


def assert_refused(result, fragment: str, url: str) -> None:  # noqa: ANN001
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], result.stderr
    assert "Traceback" not in result.output
    assert validations_stored(url) == 0


@pytest.mark.parametrize("missing", ["target", "draft"])
def test_missing_model_folders_are_refused(sqlite_url: str, tmp_path: Path, missing: str) -> None:
    profile_id = stored_profile(sqlite_url, tmp_path, target_folder=missing != "target",
                                draft_folder=missing != "draft")
    result = run("validate", str(profile_id), "--db", sqlite_url, "--vllm-python", "/no/such/python")
    assert_refused(result, f"{missing} model folder {tmp_path / f'autotune-byte-{missing}'} is missing", sqlite_url)


def test_a_builtin_target_is_refused_with_what_to_do(sqlite_url: str) -> None:
    with open_database(sqlite_url) as database, database.session() as session:
        hardware = factory.hardware(session, *factory.CPU)
        target = factory.model(session, "autotune-byte-target", "t" * 16, source="builtin:autotune-byte-target")
        profile_id = factory.study(session, "builtin", hardware, target, methods=("none", "mtp")).id
    result = run("validate", str(profile_id), "--db", sqlite_url)
    assert_refused(result, "autotune models export-hf", sqlite_url)


def test_vllm_not_installed_is_one_line_and_leaves_no_work_folder(sqlite_url: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    tempfile.tempdir = None  # read TMPDIR again
    profile_id = stored_profile(sqlite_url, tmp_path)
    try:
        result = run("validate", str(profile_id), "--db", sqlite_url, "--vllm-python", str(tmp_path / "no-python"))
    finally:
        tempfile.tempdir = None
    assert_refused(result, "vLLM is not installed", sqlite_url)
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_python_without_vllm_is_one_line(sqlite_url: str, tmp_path: Path) -> None:
    import sys

    profile_id = stored_profile(sqlite_url, tmp_path)
    result = run("validate", str(profile_id), "--db", sqlite_url, "--vllm-python", sys.executable)
    assert_refused(result, "cannot import vLLM", sqlite_url)


def test_a_port_in_use_is_refused_before_vllm_is_looked_for(sqlite_url: str, tmp_path: Path) -> None:
    profile_id = stored_profile(sqlite_url, tmp_path)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run("validate", str(profile_id), "--db", sqlite_url, "--port", str(port),
                     "--vllm-python", "/no/such/python")
    assert_refused(result, f"port {port} on 127.0.0.1 is in use", sqlite_url)


def test_an_unknown_profile_is_the_not_found_error(sqlite_url: str) -> None:
    result = run("validate", "999", "--db", sqlite_url)
    assert_refused(result, "no deployment profile with id 999", sqlite_url)


@pytest.mark.parametrize(("args", "fragment"), [
    (("--concurrency", "1,two"), "--concurrency must be comma-separated integers"),
    (("--concurrency", "0"), "--concurrency levels must be >= 1"),
    (("--runs", "0"), "Invalid value for '--runs'"),
    (("--start-timeout", "0"), "--start-timeout must be > 0"),
    (("--engine", "trtllm"), "Invalid value for '--engine'"),
])
def test_bad_options_are_one_line(sqlite_url: str, tmp_path: Path, args: tuple[str, ...], fragment: str) -> None:
    profile_id = stored_profile(sqlite_url, tmp_path)
    assert_refused(run("validate", str(profile_id), "--db", sqlite_url, *args), fragment, sqlite_url)


def test_a_workload_other_than_the_studys_is_refused(sqlite_url: str, tmp_path: Path) -> None:
    profile_id = stored_profile(sqlite_url, tmp_path)
    other = tmp_path / "other.jsonl"
    other.write_text('{"prompt": "x"}\n')
    result = run("validate", str(profile_id), "--db", sqlite_url, "--workload", str(other))
    assert_refused(result, "is not the one profile", sqlite_url)


def test_help_has_examples() -> None:
    result = run("validate", "--help")
    assert result.exit_code == 0 and "autotune validate 3 --concurrency 1,2,4 --runs 5 --json" in result.output


def test_profiles_show_and_its_json_carry_the_newest_validation(db_url: str, tmp_path: Path) -> None:
    profile_id = stored_profile(db_url, tmp_path)
    store_validation(db_url, a_result(profile_id, minute=1))
    newest = store_validation(db_url, a_result(profile_id, minute=2))
    shown = run("profiles", "show", str(profile_id), "--db", db_url, "--wide")
    assert shown.exit_code == 0, shown.output
    assert f"validation {newest.id} of profile {profile_id}" in shown.output
    assert "95.0 [90.0, 100.0]" in shown.output  # tok/s with its interval
    assert "concurrency 1: served 95.0 tok/s (schedule) vs tuned 100.0: gap -5.0% [-10.0%, +0.0%]" in shown.output
    data = json.loads(run("profiles", "show", str(profile_id), "--db", db_url, "--json").output)
    assert [v["id"] for v in data["validations"]] == [newest.id, newest.id - 1]
    assert data["validations"][0] == newest.to_dict()


def test_a_profile_never_validated_shows_an_empty_list(sqlite_url: str, tmp_path: Path) -> None:
    profile_id = stored_profile(sqlite_url, tmp_path)
    data = json.loads(run("profiles", "show", str(profile_id), "--db", sqlite_url, "--json").output)
    assert data["validations"] == []
    assert "Served:" not in run("profiles", "show", str(profile_id), "--db", sqlite_url).output


def test_the_report_draws_the_served_figures(sqlite_url: str, tmp_path: Path) -> None:
    profile_id = stored_profile(sqlite_url, tmp_path)
    store_validation(sqlite_url, a_result(profile_id))
    result = run("report", "validate-cli", "-o", str(tmp_path / "report"), "--db", sqlite_url)
    assert result.exit_code == 0, result.output
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<h2>Served (autotune validate)</h2>" in page and "95.0 [90.0, 100.0]" in page
    assert (tmp_path / "report" / "served_vs_concurrency.png").stat().st_size > 1000
    assert "gap -5.0% [-10.0%, +0.0%]" in page
