"""What a study report reads from the database (:class:`StudyData`), and what it derives from the
rows that decide (:func:`autotune.analysis.decision.deciding_rows`) for both the plots and the page:
the per-method verdicts and whether there are intervals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autotune.analysis import decision
from autotune.errors import ProfileNotFoundError
from autotune.profiles import analysis, records
from autotune.profiles.data import DeploymentProfile, HardwareInfo, ModelInfo, StudyInfo
from autotune.store import open_database, profile_queries
from autotune.store.results import TrialRow, trial_row

if TYPE_CHECKING:
    from autotune.validation.results import ValidationResult

METHOD_COLORS = {"none": "#6b6b6b", "mtp": "#1f77b4", "ngram": "#2ca02c"}
DRAFT_COLORS = ("#ff7f0e", "#d62728", "#9467bd", "#8c564b")
METHOD_NAMES = {"none": "none (baseline)", "mtp": "MTP", "draft": "draft model", "ngram": "n-gram"}


@dataclass(frozen=True)
class StudyData:
    """What the report reads: the study, its machine and models, every trial, and its profile."""

    study: StudyInfo
    hardware: HardwareInfo
    target: ModelInfo
    measurements: tuple[TrialRow, ...]
    draft_models: tuple[ModelInfo, ...]
    profile: DeploymentProfile | None
    validations: tuple[ValidationResult, ...] = ()  # the profile's, newest first (autotune validate)

    def series_name(self, key: analysis.SeriesKey) -> str:
        method, draft = key
        if method != "draft":
            return METHOD_NAMES[method]
        model = next((m for m in self.draft_models if m.fingerprint == draft), None)
        return f"draft model ({model.name if model else draft})"

    def series_legend(self, key: analysis.SeriesKey) -> str:
        """:meth:`series_name` for a plot: a draft's name is shown as written, never read as
        matplotlib mathtext (``$...$``, where a stray backslash command would fail the drawing)."""
        return self.series_name(key).replace("$", r"\$")

    def series_color(self, key: analysis.SeriesKey) -> str:
        method, draft = key
        if method != "draft":
            return METHOD_COLORS[method]
        drafts = sorted(m.fingerprint for m in self.draft_models)
        return DRAFT_COLORS[drafts.index(draft) % len(DRAFT_COLORS)] if draft in drafts else DRAFT_COLORS[0]


def load_study(db_url: str | None, study: str | int) -> StudyData:
    """The report's data for the study named ``study`` (or with that id)."""
    with open_database(db_url) as database, database.session() as session:
        record = profile_queries.find_study(session, study)
        if record is None:
            names = ", ".join(profile_queries.study_names(session)) or "none"
            raise ProfileNotFoundError(f"no study {study!r} is stored (newest: {names})")
        rows = profile_queries.study_measurements(session, record.id)
        # Loaded first, so that each row's draft is found in the session, not queried row by row.
        drafts = profile_queries.models_by_id(session, {r.draft_model_id for r in rows if r.draft_model_id})
        profile_record = profile_queries.latest_profile_of_study(session, record.id)
        validations = _validations(session, profile_record.id) if profile_record else ()
        return StudyData(
            study=records.study_info(record),
            hardware=records.hardware_info(record.hardware),
            target=records.model_info(record.target_model),
            measurements=tuple(trial_row(r) for r in rows),
            draft_models=tuple(records.model_info(m) for m in drafts.values()),
            profile=records.deployment_profile(session, profile_record) if profile_record else None,
            validations=validations,
        )


def _validations(session, profile_id: int) -> tuple[ValidationResult, ...]:  # noqa: ANN001 - a Session
    from dataclasses import replace

    from autotune.store.validations import profile_validations
    from autotune.validation.results import ValidationResult

    return tuple(replace(ValidationResult.from_dict(r.result), id=r.id, profile_id=r.profile_id)
                 for r in profile_validations(session, profile_id))



def has_intervals(data: StudyData) -> bool:
    """Whether the figures draw 95 % intervals: the rows that decide come from a confirmation run (a
    study only screened has one run per configuration, :data:`autotune.report.page.NO_SPEEDUPS`)."""
    return confirmed(decision.deciding_rows(data.measurements))


def method_verdicts(data: StudyData) -> list[decision.MethodVerdict]:
    """The per-method verdict the tuner stores and prints (:func:`autotune.analysis.decision.method_verdicts`),
    for every method (each draft model apart) the study's trials used, simplest first."""
    order = {method: i for i, method in enumerate(METHOD_NAMES)}
    names = sorted({decision.method_name(m) for m in data.measurements},
                   key=lambda name: (order[name.split(":")[0]], name))
    return decision.method_verdicts(data.measurements, names)


def confirmed(rows: Sequence[TrialRow]) -> bool:
    """Whether any of ``rows`` comes from a confirmation run (rows with 95 % intervals)."""
    return any(m.confirmed for m in rows)
