"""A trial's prediction in profile documents: kept through export and import, optional in older
files (no ``prediction`` key: not predicted), refused when it is not an object or null."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import profile_factory as factory
from autotune.errors import ConfigurationError
from autotune.serving import export_profile
from autotune.profiles import import_profile, show_profile
from autotune.profiles.data import trial_document, trial_from_document
from autotune.store import open_database
from autotune.store.tables import MeasurementRecord

PREDICTION = {
    "tokens_per_s": {"value": 500.0, "low": 450.0, "high": 560.0},
    "tpot_ms_p50": {"value": 2.0, "low": 1.8, "high": 2.3},
    "sigma": 0.05,
    "source": "timed",
}
ROW = {"trial_number": 3, "method": "mtp", "depth": 2, "concurrency": 4, "state": "complete", "tokens_per_s": 480.0}


def test_a_trial_document_reads_and_writes_the_prediction() -> None:
    row = trial_from_document({**ROW, "prediction": PREDICTION})
    assert row.prediction == PREDICTION and trial_document(row)["prediction"] == PREDICTION
    assert trial_from_document(ROW).prediction is None  # written before predictions existed
    assert trial_from_document({**ROW, "prediction": None}).prediction is None
    assert trial_from_document(trial_document(row)) == row


@pytest.mark.parametrize("bad", [[500.0], "500", 500.0])
def test_a_prediction_must_be_an_object_or_null(bad) -> None:  # noqa: ANN001
    with pytest.raises(ConfigurationError, match=r"^measurement.prediction must be a JSON object or null, got "):
        trial_from_document({**ROW, "prediction": bad})


def test_predictions_survive_export_and_import(db_url: str, tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path / 'source.db'}"
    profile_id = factory.populate(source)["h100-old"]
    with open_database(source) as database, database.session() as session:
        study = show_profile(source, profile_id, with_measurements=False).study.name
        rows = session.query(MeasurementRecord).order_by(MeasurementRecord.id).all()
        ours = [r for r in rows if r.study.name == study]
        predicted = [r for r in ours if r.phase == "screening"][:2] + [r for r in ours if r.phase == "confirmation"][:1]
        assert len(predicted) == 3
        for row in predicted:
            row.prediction = PREDICTION
        keys = {(r.phase, r.trial_number) for r in predicted}
    text = export_profile(show_profile(source, profile_id), "json")
    document = json.loads(text)
    assert document["format_version"] == 3  # an optional key: the format is unchanged
    written = {(m["phase"], m["trial_number"]): m["prediction"] for m in document["profile"]["measurements"]}
    assert {k for k, v in written.items() if v is not None} == keys

    path = tmp_path / "profile.json"
    path.write_text(text)
    imported = show_profile(db_url, import_profile(db_url, path).id)
    assert {m.key: m.prediction for m in imported.measurements} == written
    assert all(written[k] == PREDICTION for k in keys)

    # A file written before predictions existed (no key at all) imports as not predicted.
    for m in document["profile"]["measurements"]:
        del m["prediction"]
    document["profile"]["study"]["name"] = "h100-old-again"
    path.write_text(json.dumps(document))
    again = show_profile(db_url, import_profile(db_url, path).id)
    assert all(m.prediction is None for m in again.measurements)
