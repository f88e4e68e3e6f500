"""A profile's acceptance per request category, and its figures for a stated mix of categories.

The categories come from the trial the profile was taken from (its measurement's
``acceptance_by_category``, :mod:`autotune.analysis.categories`); the mix math is
:mod:`autotune.analysis.mix`. Pure functions over profile dataclasses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from autotune.analysis.categories import category_differences
from autotune.analysis.mix import MixFigures, check_mix, figures_for_mix, own_mix, tokens_per_request
from autotune.profiles.data import DeploymentProfile
from autotune.store.results import TrialRow

MIX_FIGURES = ("tokens_per_s", "tpot_ms_p50", "speedup")
__all__ = ["category_differences", "category_rows", "profile_categories", "profile_mix", "row_categories"]


def row_categories(row: TrialRow | None) -> dict[str, dict[str, Any]] | None:
    """A stored trial's acceptance per category (None: its workload had no categories, or it was
    stored before they were measured)."""
    if row is None:
        return None
    stored = ((row.extra or {}).get("measurement") or {}).get("acceptance_by_category")
    return dict(stored) if stored else None


def profile_categories(profile: DeploymentProfile,
                       measurements: Iterable[TrialRow] | None = None) -> dict[str, dict[str, Any]] | None:
    """Acceptance per category of the profile's configuration: its chosen trial's, among the
    profile's loaded measurements or ``measurements`` (a study's rows)."""
    if measurements is None:
        return row_categories(profile.chosen_measurement())
    key = (profile.chosen_phase, profile.chosen_trial)
    return row_categories(next((m for m in measurements if m.key == key), None))


def category_rows(by_category: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per category for tables: acceptance length with its 95 % interval, the prompts
    (n) and requests it rests on, tokens after the first per request, its share of the requests."""
    shares = own_mix(by_category)
    return [{"category": name, "acceptance_length": entry["value"], "low": entry.get("low"),
             "high": entry.get("high"), "prompts": entry.get("n"), "requests": entry["requests"],
             "tokens_per_request": tokens_per_request(entry), "share": shares[name]}
            for name, entry in sorted(by_category.items())]


def profile_mix(profile: DeploymentProfile, mix: Mapping[str, float]) -> MixFigures:
    """The profile's tokens/s, TPOT p50 and speedup carried over to ``mix`` (request shares by
    category); ConfigurationError when the profile has no categories or lacks one of the mix's."""
    by_category = profile_categories(profile)
    check_mix(mix, by_category, f"profile {profile.id}")
    return figures_for_mix(by_category, mix, {name: profile.estimate(name) for name in MIX_FIGURES})
