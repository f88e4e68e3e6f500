"""Decide and store: the study's analysis (its verdict, per concurrency, and the recommended
configuration) and its deployment profile.

Input: the :class:`~autotune.search.state.Study` and its stored rows. Output: a
:class:`~autotune.search.outcome.StudyAnalysis` (:func:`analyse`), and the profile row of the
recommendation, replaced under the study lock (:func:`store_profile`; nothing is stored while the
study has no recommendation). The screening phase stores it after every trial, the confirmation
once it is done.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from autotune.analysis import decision
from autotune.analysis.decision import ProfileChoice
from autotune.search import budget
from autotune.search.outcome import StudyAnalysis
from autotune.search.state import Study
from autotune.store import results
from autotune.store.tables import StudyRecord


def analyse(study: Study, rows: list[results.TrialRow]) -> StudyAnalysis:
    """The analysis of the study's ``rows`` under its objective, space and repeats."""
    space = study.setup.space
    method_names = [
        name for method in space.methods
        for name in ([f"draft:{d}" if d != "builtin" else "draft" for d in space.drafts]
                     if method == "draft" else [method])
    ]
    repeated = budget.repeat_count(study.ledger.trials())
    return StudyAnalysis.of(rows, study.setup.objective, list(space.concurrencies), method_names, repeated,
                            space.max_depth)


def store_profile(study: Study) -> StudyAnalysis:
    """Analyse the stored rows and store the recommendation as the study's profile; the analysis."""
    with study.lock():
        analysis = analyse(study, study.rows())
        choice = analysis.profile
        if choice is None:
            return analysis
        with study.database.session() as session:
            results.save_profile(session, session.get(StudyRecord, study.study_id),
                                 _profile_entry(study, analysis, choice))
    return analysis


def _profile_entry(study: Study, analysis: StudyAnalysis, choice: ProfileChoice) -> results.ProfileEntry:
    row = choice.row
    return results.ProfileEntry(
        measurement_id=row.measurement_id, method=row.method, draft_model_id=study.draft_ids.get(row.draft),
        depth=row.depth, concurrency=row.concurrency, tokens_per_s=row.tokens_per_s, tpot_ms_p50=row.tpot_ms_p50,
        speedup=row.speedup, per_concurrency=[entry.to_dict() for entry in analysis.per_concurrency],
        repetitions=row.repetitions, intervals=row.intervals, details=profile_details(study, analysis, choice),
    )


def profile_details(study: Study, analysis: StudyAnalysis, choice: ProfileChoice) -> dict[str, Any]:
    """The profile's ``details``: the recommended row and its label, the SLOs and whether it meets
    them, what it is tied with, the verdict, the Pareto front, the summary, the counts and builds."""
    row = choice.row
    return {
        "label": row.label, "draft": row.draft, "slo": study.setup.objective.slo.to_dict(),
        "slo_met": choice.slo_met, "slo_violation": choice.violation, "trial": row.to_dict(),
        "confirmed": row.confirmed, "phase": row.phase,
        "tied_with": [decision.config_label(r) for r in choice.decision.tied] if choice.decision else [],
        "verdict": [entry.to_dict() for entry in analysis.verdict],
        "pareto_front": [entry.label for entry in analysis.pareto_front],
        "summary": analysis.summary, "counts": asdict(analysis.counts),
        "model_loads": analysis.model_loads,
    }
