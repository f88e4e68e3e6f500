"""Moving a profile between databases: the JSON document and its import.

The document holds the whole profile with its study, hardware, target, drafts and every trial,
identified by content (fingerprints, study name, phase and trial number), so that exporting,
importing into a fresh database and exporting again gives the same document except for the
database ids.

Format versions: 1 (before repeated measurements) has no phases, repetitions or intervals: its
trials and figures import as screening passes (n = 1, no interval). 2 adds them: a trial is
identified by (phase, trial_number), the confirmation rows carry their intervals, and the profile
its ``repetitions``, ``intervals`` and ``chosen_phase``. 3 names the axis concurrency (issue 38):
``concurrency``, ``per_concurrency``, ... where 1 and 2 have ``batch_size``, ``per_batch_size``, ...;
those keys are read under their new names (:mod:`autotune.store.renamed_keys`), an engine's own keys
untouched. This autotune reads all three and writes 3.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from autotune.errors import ConfigurationError
from autotune.profiles import records
from autotune.profiles.data import DeploymentProfile, ModelInfo
from autotune.profiles.query import load_profile
from autotune.store import open_database, profile_queries
from autotune.store.database import display_url
from autotune.store.locks import named_lock
from autotune.store.tables import DeploymentProfileRecord, HardwareRecord, ModelRecord
from autotune.store.renamed_keys import with_current_keys
from autotune.store.rows import get_or_create

DOCUMENT_FORMAT = "autotune-deployment-profile"
DOCUMENT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
BATCH_SIZE_VERSIONS = (1, 2)  # the versions that name the concurrency axis batch size
# The profile dataclasses' text fields (annotations as written) -> the JSON values they accept.
TEXT_TYPES = {"str": (str,), "str | None": (str, type(None))}


def profile_document(profile: DeploymentProfile) -> dict[str, Any]:
    """The JSON-ready export of ``profile`` (load it with its measurements for a complete record)."""
    return {"format": DOCUMENT_FORMAT, "format_version": DOCUMENT_VERSION, "profile": profile.to_dict()}


def dumps(profile: DeploymentProfile) -> str:
    """The document as stable, human-diffable JSON text (strict JSON: no NaN or Infinity)."""
    try:
        return json.dumps(profile_document(profile), indent=2, sort_keys=True, allow_nan=False) + "\n"
    except ValueError:
        raise ConfigurationError(
            f"profile {profile.id} holds a NaN or infinite figure, which JSON cannot represent; "
            "re-measure the trial that produced it"
        ) from None


def parse_document(text: str, source: str = "the profile file") -> DeploymentProfile:
    """A profile from document text; ConfigurationError saying what is wrong with ``source``."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{source} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(document, dict) or document.get("format") != DOCUMENT_FORMAT:
        raise ConfigurationError(
            f"{source} is not an autotune profile export (expected \"format\": \"{DOCUMENT_FORMAT}\"; "
            "write one with `autotune export ID --format json`)"
        )
    _check_characters(document, source)
    version = document.get("format_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        readable = ", ".join(str(v) for v in READABLE_VERSIONS[:-1]) + f" and {READABLE_VERSIONS[-1]}"
        raise ConfigurationError(
            f"{source} has format_version {version!r}; this autotune reads versions {readable} "
            "(upgrade autotune to import newer exports)"
        )
    data = document.get("profile")
    try:
        profile = DeploymentProfile.from_dict(with_current_keys(data) if version in BATCH_SIZE_VERSIONS else data)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{source}: {exc}") from None
    except (TypeError, ValueError) as exc:  # a value of the wrong type inside a known key
        raise ConfigurationError(f"{source}: malformed profile ({exc})") from None
    _check_text_fields(profile, source)
    _check_references(profile, source)
    return profile


def _check_characters(value: Any, source: str, where: str = "") -> None:
    """Refuse a NUL character or a lone surrogate anywhere (keys too): PostgreSQL stores neither, no
    shell argument holds a NUL and no UTF-8 file a lone surrogate, so such a name could be imported
    but never exported or reported."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_characters(key, source, where)
            _check_characters(item, source, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_characters(item, source, f"{where}[{i}]")
    elif isinstance(value, str) and ("\0" in value or not _is_utf8(value)):
        raise ConfigurationError(f"{source}: {where or 'the document'} holds a NUL character or a lone surrogate "
                                 f"({value!r}), which a database, a script or a text file cannot carry")


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_text_fields(profile: DeploymentProfile, source: str) -> None:
    """Names, paths and labels (the fields declared ``str``) must be JSON strings: exports, reports
    and the database treat them as text."""
    for what, part in _parts(profile):
        for f in fields(part):
            value = getattr(part, f.name)
            if f.type in TEXT_TYPES and not isinstance(value, TEXT_TYPES[f.type]):
                raise ConfigurationError(f"{source}: {what}.{f.name} must be a string, got {json.dumps(value)}")


def _parts(profile: DeploymentProfile) -> Iterator[tuple[str, Any]]:
    yield from (("profile", profile), ("study", profile.study), ("hardware", profile.hardware), ("target", profile.target))
    if profile.draft is not None:
        yield "draft", profile.draft
    yield from ((f"draft_models[{i}]", m) for i, m in enumerate(profile.draft_models))
    yield from ((f"measurements[{i}]", m) for i, m in enumerate(profile.measurements))


def _check_references(profile: DeploymentProfile, source: str) -> None:
    # The store's unique key is (study, phase, trial_number): confirmation rows number their own.
    keys = [m.key for m in profile.measurements]
    if len(set(keys)) != len(keys):
        raise ConfigurationError(f"{source}: two measurements share a phase and trial number")
    if profile.chosen_trial is not None and profile.chosen_measurement() is None:
        raise ConfigurationError(
            f"{source}: chosen_trial {profile.chosen_trial} ({profile.chosen_phase}) is not among the measurements"
        )
    for m in profile.measurements:
        if m.draft_fingerprint is not None and profile.model_by_fingerprint(m.draft_fingerprint) is None:
            raise ConfigurationError(
                f"{source}: trial {m.trial_number} uses draft {m.draft_fingerprint}, absent from draft_models"
            )


def import_profile(db_url: str | None, path: Path | str) -> DeploymentProfile:
    """Store the profile exported to ``path`` (JSON) and return it as stored (with its new id).

    Hardware and models are matched by fingerprint and created when missing; the study must not
    exist yet (a second import of the same file is refused rather than duplicated).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"{path} is not a UTF-8 text file") from None
    profile = parse_document(text, str(path))
    with open_database(db_url) as database:
        # The study's lock, as tune takes it: two imports of one file, or an import racing a tune
        # of that study, take turns, and the later one finds the study there.
        with named_lock(database.engine, profile.study.name), database.session() as session:
            existing = profile_queries.find_study(session, profile.study.name)
            if existing is not None:
                raise ConfigurationError(
                    f"study {profile.study.name!r} already exists in {display_url(database.engine.url)} "
                    f"(id {existing.id}): this profile was imported or tuned there before; "
                    "see `autotune profiles list --study NAME`"
                )
            record = store_profile(session, profile)
            return load_profile(session, record.id)


def store_profile(session: Session, profile: DeploymentProfile) -> DeploymentProfileRecord:
    """Insert ``profile`` (study, trials, the profile row) reusing stored hardware and models."""
    hardware = get_or_create(session, HardwareRecord, *_split_key(profile.hardware.to_dict()))
    models = _models(session, [profile.target, *([profile.draft] if profile.draft else []), *profile.draft_models])
    study = records.new_study_record(profile.study, hardware, models[profile.target.fingerprint])
    session.add(study)
    measurements = records.new_measurement_records(profile.measurements, study, models)
    session.add_all(measurements)
    chosen = next((m for m in measurements if (m.phase, m.trial_number) == (profile.chosen_phase, profile.chosen_trial)),
                  None)
    record = DeploymentProfileRecord(
        study=study,
        hardware=hardware,
        target_model=models[profile.target.fingerprint],
        draft_model=models[profile.draft.fingerprint] if profile.draft else None,
        method=profile.method,
        depth=profile.depth,
        concurrency=profile.concurrency,
        objective=profile.objective,
        tokens_per_s=profile.tokens_per_s,
        tpot_ms_p50=profile.tpot_ms_p50,
        speedup=profile.speedup,
        repetitions=profile.repetitions,
        intervals=dict(profile.intervals) or None,
        per_concurrency=[dict(row) for row in profile.per_concurrency],
        details=dict(profile.details),
        created_at=profile.created_at,
    )
    session.add(record)
    session.flush()
    record.measurement_id = chosen.id if chosen else None
    session.flush()
    return record


def _models(session: Session, models: list[ModelInfo]) -> dict[str, ModelRecord]:
    """Stored records for ``models`` by fingerprint, creating the missing ones."""
    stored: dict[str, ModelRecord] = {}
    for model in models:
        stored[model.fingerprint] = get_or_create(session, ModelRecord, *_split_key(model.to_dict()))
    return stored


def _split_key(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A HardwareInfo's or ModelInfo's fields (named as their table's columns) as (the fingerprint,
    the other columns): the unique key and the values of a new row."""
    rest = dict(values)
    return {"fingerprint": rest.pop("fingerprint")}, rest
