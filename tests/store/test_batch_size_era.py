"""A database that main wrote before issue 38 renamed batch size to concurrency
(tests/data/batch_size_era, made by its make_database.py with main at 7c6dc96, schema 0008: a real
TPE study of the tests' tiny models, confirmed, with its profile) is upgraded by `autotune db upgrade`
and read by today's code: the CLI's profiles list/show/best, trials and export say concurrency with the
values stored then, the study resumes where it stopped (its Optuna trials keep the parameter
``batch_size``, its identity digest the old key), and the profile's format-2 export imports."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import optuna
import pytest
from click.testing import CliRunner, Result

from autotune.cli import cli
from autotune.search import study_trials, tune
from autotune.search.space import OPTUNA_CONCURRENCY_KEY
from autotune.store import migrate, open_database

DATA = Path(__file__).parents[1] / "data" / "batch_size_era"
RENAMED = "--batch-size is now --concurrency (the old name still works)"


def _maker():
    spec = importlib.util.spec_from_file_location("make_batch_size_era", DATA / "make_database.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKER = _maker()


@pytest.fixture
def era(tmp_path: Path) -> Path:
    """A copy of the old database and its model files (the shipped ones are never written)."""
    folder = tmp_path / "era"
    shutil.copytree(DATA, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return folder


def url(folder: Path) -> str:
    return f"sqlite:///{folder / 'study.sqlite'}"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def keys(value: object) -> set[str]:
    """Every key of a JSON document, at any depth."""
    if isinstance(value, dict):
        return set(value).union(*(keys(item) for item in value.values()))
    return set().union(*(keys(item) for item in value)) if isinstance(value, list) else set()


def stored_then(folder: Path) -> dict:
    """What the old schema holds, read with plain SQL before anything upgrades it."""
    with sqlite3.connect(folder / "study.sqlite") as connection:
        (revision,) = connection.execute("SELECT version_num FROM autotune_alembic_version").fetchone()
        profile = connection.execute("SELECT id, batch_size, per_batch_size FROM autotune_deployment_profiles").fetchone()
        trials = connection.execute(
            "SELECT phase, trial_number, batch_size FROM autotune_measurements ORDER BY phase, trial_number").fetchall()
        (space,) = connection.execute("SELECT search_space FROM autotune_tuning_studies").fetchone()
        params = Counter(name for (name,) in connection.execute("SELECT param_name FROM trial_params"))
    return {"revision": revision, "profile_id": profile[0], "concurrency": profile[1],
            "per_batch_size": json.loads(profile[2]), "trials": trials, "space": json.loads(space), "params": params}


def test_the_old_database_upgrades_and_reads_as_concurrency(era: Path) -> None:
    then = stored_then(era)
    assert then["revision"] == "0008_validation_runs" and then["space"]["batch_sizes"] == [1, 2]  # really the old one
    assert then["per_batch_size"] and all("batch_size" in row for row in then["per_batch_size"])

    upgraded = run("db", "upgrade", "--db", url(era))
    assert upgraded.exit_code == 0 and "at head" in upgraded.output, upgraded.output
    listed = run("profiles", "list", "--json", "--db", url(era))
    assert listed.exit_code == 0, listed.output
    (summary,) = json.loads(listed.stdout)
    assert (summary["id"], summary["concurrency"]) == (then["profile_id"], then["concurrency"])
    with open_database(url(era), migrate=False) as database:
        assert migrate.current_revision(database.engine) == migrate.head_revision()

    shown = json.loads(run("profiles", "show", str(summary["id"]), "--json", "--db", url(era)).stdout)
    assert shown["concurrency"] == then["concurrency"] and not {key for key in keys(shown) if "batch" in key}
    assert [row["concurrency"] for row in shown["per_concurrency"]] == [row["batch_size"] for row in then["per_batch_size"]]
    assert [(m["phase"], m["trial_number"], m["concurrency"]) for m in sorted(
        shown["measurements"], key=lambda m: (m["phase"], m["trial_number"]))] == then["trials"]
    text = run("profiles", "show", str(summary["id"]), "--wide", "--db", url(era)).stdout
    assert "batch" not in text.replace(MAKER.STUDY, "").lower()  # the study keeps its name

    trials = json.loads(run("trials", MAKER.STUDY, "--json", "--db", url(era)).stdout)
    assert trials and all("concurrency" in row and "batch_size" not in row for row in trials)

    best = run("profiles", "best", "--model", summary["model"], "--hardware", "test cpu", "--batch-size", "1", "--json",
               "--db", url(era))
    assert best.exit_code == 0, best.output
    assert best.stderr.splitlines() == [RENAMED]  # the old option works and says so, once
    assert json.loads(best.stdout)["operating_point"]["concurrency"] == 1

    exported = era / "exported.json"
    assert run("export", str(summary["id"]), "--format", "json", "-o", str(exported), "--db", url(era)).exit_code == 0
    document = json.loads(exported.read_text())
    assert document["format_version"] == 3 and document["profile"]["concurrency"] == then["concurrency"]
    assert not {key for key in keys(document) if "batch" in key}


def test_the_old_study_resumes_where_it_stopped(era: Path) -> None:
    then = stored_then(era)
    assert then["params"][OPTUNA_CONCURRENCY_KEY] > 0  # the Optuna parameter as main stored it

    assert run("db", "upgrade", "--db", url(era)).exit_code == 0
    result = tune(MAKER.options(era, concurrencies=(1, 2), n_trials=6))

    assert result.status == "complete" and result.trials_this_run == 2
    screened = [row for row in study_trials(url(era), MAKER.STUDY) if row.phase == "screening"]
    before = [trial for trial in then["trials"] if trial[0] == "screening"]
    assert [("screening", row.trial_number, row.concurrency) for row in screened][:len(before)] == before
    labels = Counter(row.label for row in screened if not row.extra.get("retry_of") and row.state != "failed")
    assert all(count == 1 for count in labels.values()), labels  # no old configuration measured again
    trials = optuna.load_study(study_name=MAKER.STUDY, storage=url(era)).trials
    assert all(OPTUNA_CONCURRENCY_KEY in trial.params for trial in trials)  # old and new: one parameter name
    assert result.profile is not None and result.profile.row.concurrency in (1, 2)


def test_a_format_2_export_imports_under_the_new_names(tmp_path: Path) -> None:
    old = json.loads((DATA / "profile-v2.json").read_text())
    assert old["format_version"] == 2 and "per_batch_size" in old["profile"]
    db_url = f"sqlite:///{tmp_path / 'fresh.db'}"

    imported = run("profiles", "import", str(DATA / "profile-v2.json"), "--json", "--db", db_url)
    assert imported.exit_code == 0, imported.output
    shown = json.loads(run("profiles", "show", str(json.loads(imported.stdout)["id"]), "--json", "--db", db_url).stdout)
    assert shown["concurrency"] == old["profile"]["batch_size"]
    assert [row["concurrency"] for row in shown["per_concurrency"]] == [
        row["batch_size"] for row in old["profile"]["per_batch_size"]]
    assert sorted(m["concurrency"] for m in shown["measurements"]) == sorted(
        m["batch_size"] for m in old["profile"]["measurements"])
