"""JSON export and import: a lossless round trip through a fresh database, and refused bad files."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import profile_factory as factory
from autotune.errors import ConfigurationError
from autotune.serving import export_profile
from autotune.profiles import best_profile, import_profile, list_profiles, query, show_profile
from autotune.store import open_database
from autotune.store.tables import HardwareRecord, ModelRecord
from autotune.store.renamed_keys import RENAMED_KEYS


@pytest.fixture
def exported(tmp_path: Path) -> tuple[str, Path]:
    """The h100-old profile exported from its own SQLite database: (document text, file)."""
    source = f"sqlite:///{tmp_path / 'source.db'}"
    ids = factory.populate(source)
    text = export_profile(show_profile(source, ids["h100-old"]), "json")
    path = tmp_path / "profile.json"
    path.write_text(text)
    return text, path


def without_ids(text: str) -> dict:
    document = json.loads(text)
    document["profile"].pop("id")
    return document


def test_export_import_export_is_lossless(db_url: str, exported) -> None:  # noqa: ANN001
    text, path = exported
    imported = import_profile(db_url, path)
    again = export_profile(show_profile(db_url, imported.id), "json")
    assert without_ids(again) == without_ids(text)
    document = json.loads(text)
    assert document["format"] == "autotune-deployment-profile" and document["format_version"] == 3
    assert len(document["profile"]["measurements"]) == 61 + 25
    assert document["profile"]["hardware"]["fingerprint"] == factory.H100[1]


def test_confirmation_rows_and_intervals_survive_export_and_import(db_url: str, exported, tmp_path: Path) -> None:  # noqa: ANN001
    text, path = exported
    source = show_profile(f"sqlite:///{tmp_path / 'source.db'}", json.loads(text)["profile"]["id"])
    imported = show_profile(db_url, import_profile(db_url, path).id)
    assert (imported.repetitions, imported.intervals, imported.chosen_phase, imported.chosen_trial) == (
        source.repetitions, source.intervals, "confirmation", source.chosen_trial)
    assert imported.confirmed and imported.estimate("speedup") == source.estimate("speedup")
    assert imported.estimate("speedup").has_interval and imported.tied_with == ["mtp@2", "mtp@3"]

    def rows(profile) -> dict:  # noqa: ANN001
        return {m.key: (m.repetitions, m.intervals, m.speedup, m.extra, m.tokens_per_s) for m in profile.measurements}

    assert rows(imported) == rows(source)
    confirmation = [m for m in imported.measurements if m.confirmed]
    assert len(confirmation) == 25 and all(m.intervals["tokens_per_s"]["n"] == factory.ROUNDS for m in confirmation)
    assert all(m.extra["samples"] and m.extra["confirmation"]["run"] == 1 for m in confirmation)
    assert imported.chosen_measurement().estimate("speedup") == imported.estimate("speedup")
    assert imported.per_concurrency == source.per_concurrency


def old_names(value: Any) -> Any:
    """``value`` with its keys named as formats 1 and 2 named them, before issue 38 (batch size)."""
    old = {new: name for name, new in RENAMED_KEYS.items()}
    if isinstance(value, dict):
        return {old.get(key, key): old_names(item) for key, item in value.items()}
    return [old_names(item) for item in value] if isinstance(value, list) else value


def version_1(document: dict) -> dict:
    """``document`` as autotune wrote it before repeated measurements (format_version 1)."""
    profile = document["profile"]
    for key in ("repetitions", "intervals", "chosen_phase"):
        profile.pop(key)
    for key in ("confirmed", "phase", "tied_with"):
        profile["details"].pop(key, None)
    for row in profile["per_concurrency"]:
        for key in ("tokens_per_s_low", "tokens_per_s_high", "speedup_low", "speedup_high", "repetitions", "leader",
                    "tied", "confirmed", "note"):
            row.pop(key)
    for m in profile["measurements"]:
        for key in ("phase", "repetitions", "intervals"):
            m.pop(key)
    return old_names({**document, "format_version": 1})


def test_a_version_1_document_imports_as_one_screening_run_each(db_url: str, tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path / 'old.db'}"
    ids = factory.populate(source)
    document = version_1(json.loads(export_profile(show_profile(source, ids["cpu"]), "json")))
    assert "intervals" not in json.dumps(document) and "phase" not in json.dumps(document)
    assert "per_batch_size" in document["profile"] and "concurrency" not in json.dumps(document)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(document))
    imported = show_profile(db_url, import_profile(db_url, path).id)
    assert (imported.repetitions, imported.intervals, imported.chosen_phase, imported.confirmed) == (1, {}, "screening", False)
    tokens = imported.estimate("tokens_per_s")
    assert (tokens.value, tokens.n, tokens.low, tokens.high) == (imported.tokens_per_s, 1, None, None)
    assert len(imported.measurements) == 61
    assert all((m.phase, m.repetitions, m.intervals) == ("screening", 1, {}) for m in imported.measurements)
    assert imported.chosen_measurement().tokens_per_s == imported.tokens_per_s
    assert imported.concurrency == show_profile(source, ids["cpu"]).concurrency
    assert [row["concurrency"] for row in imported.per_concurrency] == [
        row["batch_size"] for row in document["profile"]["per_batch_size"]]
    again = json.loads(export_profile(imported, "json"))
    assert again["format_version"] == 3 and again["profile"]["repetitions"] == 1


def test_imported_trials_answer_best_queries(db_url: str, exported, monkeypatch) -> None:  # noqa: ANN001
    _, path = exported
    import_profile(db_url, path)
    monkeypatch.setattr(query, "current_fingerprint", lambda: factory.H100[1])
    best = best_profile(db_url, "tiny-target", concurrency=2)
    assert best.operating_point.config_label == "mtp@4"


def test_import_reuses_stored_hardware_and_models_and_refuses_a_second_import(db_url: str, exported) -> None:  # noqa: ANN001
    _, path = exported
    ids = factory.populate(db_url)  # same fingerprints, and a study named h100-old already
    with pytest.raises(ConfigurationError, match="study 'h100-old' already exists.*imported or tuned there before"):
        import_profile(db_url, path)
    document = json.loads(path.read_text())
    document["profile"]["study"]["name"] = "h100-old-imported"
    path.write_text(json.dumps(document))
    imported = import_profile(db_url, path)
    assert imported.id not in ids.values()
    with open_database(db_url) as database, database.session() as session:
        assert session.query(HardwareRecord).count() == 2
        assert session.query(ModelRecord).count() == 3
    assert [p.study.name for p in list_profiles(db_url, study="h100-old-imported")] == ["h100-old-imported"]


def mutate(text: str, change) -> str:  # noqa: ANN001
    document = json.loads(text)
    change(document)
    return json.dumps(document)


BAD_DOCUMENTS = [
    (lambda t: "{not json", "not valid JSON"),
    (lambda t: "[1, 2]", "not an autotune profile export"),
    (lambda t: mutate(t, lambda d: d.update(format="something-else")), "not an autotune profile export"),
    (lambda t: mutate(t, lambda d: d.update(format_version=4)), "format_version 4; this autotune reads versions 1, 2 and 3"),
    (lambda t: mutate(t, lambda d: d["profile"].pop("method")), "profile lacks the key 'method'"),
    (lambda t: mutate(t, lambda d: d["profile"]["study"].pop("name")), "study lacks the key 'name'"),
    (lambda t: mutate(t, lambda d: d["profile"].update(method="eagle")), "method 'eagle' is not one of"),
    (lambda t: mutate(t, lambda d: d["profile"].update(depth=0)), "depth 0 does not fit method mtp"),
    (lambda t: mutate(t, lambda d: d["profile"].update(concurrency="eight")), "concurrency must be an integer"),
    (lambda t: mutate(t, lambda d: d["profile"].update(created_at="yesterday")), "profile.created_at must be an ISO-8601"),
    (lambda t: mutate(t, lambda d: d["profile"].update(measurements={})), "measurements must be a JSON list"),
    (lambda t: mutate(t, lambda d: d["profile"]["measurements"].append("trial")), "measurement must be a JSON object"),
    (lambda t: mutate(t, lambda d: d["profile"].update(chosen_trial=12345)), r"chosen_trial 12345 \(confirmation\) is not among"),
    (lambda t: mutate(t, lambda d: d["profile"].update(chosen_phase="screening", chosen_trial=999)),
     r"chosen_trial 999 \(screening\) is not among"),
    (lambda t: mutate(t, lambda d: d["profile"].update(chosen_phase="final")), "profile.chosen_phase must be one of screening"),
    (lambda t: mutate(t, lambda d: d["profile"].update(repetitions=0)), "profile.repetitions must be an integer >= 1"),
    (lambda t: mutate(t, lambda d: d["profile"].update(intervals={"speedup": 2.0})), "profile.intervals must map"),
    (lambda t: mutate(t, lambda d: d["profile"]["measurements"][0].update(phase="warmup")), "measurement.phase must be one of"),
    (lambda t: mutate(t, lambda d: d["profile"]["measurements"][0].update(repetitions="5")),
     "measurement.repetitions must be an integer"),
    (lambda t: mutate(t, lambda d: d["profile"].update(draft_models=[])), "uses draft dddd000011112222, absent"),
    (lambda t: mutate(t, lambda d: d["profile"]["measurements"].append(copy.deepcopy(d["profile"]["measurements"][0]))),
     "two measurements share a phase and trial number"),
]


@pytest.mark.parametrize("make, message", BAD_DOCUMENTS)
def test_malformed_files_are_refused_with_the_reason(sqlite_url: str, exported, tmp_path, make, message) -> None:  # noqa: ANN001
    text, _ = exported
    bad = tmp_path / "bad.json"
    bad.write_text(make(text))
    with pytest.raises(ConfigurationError, match=message):
        import_profile(sqlite_url, bad)
    assert list_profiles(sqlite_url) == []  # nothing half-imported


def test_unreadable_files(sqlite_url: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read .*missing.json"):
        import_profile(sqlite_url, tmp_path / "missing.json")
    with pytest.raises(ConfigurationError, match="cannot read"):
        import_profile(sqlite_url, tmp_path)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigurationError, match="not a UTF-8 text file"):
        import_profile(sqlite_url, binary)


def test_non_finite_figures_cannot_be_exported() -> None:
    profile = replace(factory.profile_data("mtp", 2, 1, {1: ("mtp", 2)}), speedup=float("nan"))
    with pytest.raises(ConfigurationError, match="NaN or infinite figure"):
        export_profile(profile, "json")
