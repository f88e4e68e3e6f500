"""Tuning: search the speculative-decoding configurations of a target on this machine with Optuna.

    from autotune.search import TuneOptions, tune
    result = tune(TuneOptions(n_trials=12))
    print("\\n".join(result.analysis.summary))

``list_studies``, ``study_trials`` and ``study_listing`` read what earlier runs stored.
"""

from __future__ import annotations

from autotune.search.objective import OBJECTIVES, PERCENTILES, Slo
from autotune.search.options import TuneOptions
from autotune.search.outcome import StudyAnalysis, TrialListing, TuneProgress, TuneResult
from autotune.search.samplers import SAMPLERS
from autotune.search.tuner import tune
from autotune.store import open_database
from autotune.store.results import StudySummary, TrialRow

__all__ = [
    "OBJECTIVES",
    "PERCENTILES",
    "SAMPLERS",
    "Slo",
    "StudyAnalysis",
    "StudySummary",
    "TrialListing",
    "TrialRow",
    "TuneOptions",
    "TuneProgress",
    "TuneResult",
    "list_studies",
    "study_listing",
    "study_trials",
    "tune",
]


def list_studies(db_url: str | None = None) -> list[StudySummary]:
    """Every tuning study stored in the database, newest first."""
    from autotune.store import results

    with open_database(db_url) as database, database.session() as session:
        return results.list_studies(session)


def study_trials(db_url: str | None, name: str) -> list[TrialRow]:
    """The finished trials of study ``name`` (ConfigurationError when there is no such study)."""
    from autotune.store import results

    with open_database(db_url) as database, database.session() as session:
        return results.study_trials(session, name)


def study_listing(db_url: str | None, name: str) -> TrialListing:
    """The trials of study ``name`` with its builds and the edges of its answer (``autotune trials``)."""
    from autotune.store import results

    with open_database(db_url) as database, database.session() as session:
        rows = results.study_trials(session, name)
        study = results.find_study(session, name)
        return TrialListing.of(rows, dict(study.search_space or {}), Slo.from_dict(study.slo or {}))
