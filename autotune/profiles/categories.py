"""A profile's acceptance per request category, and its figures for a stated mix of categories.

The categories come from the trial the profile was taken from (its measurement's
``acceptance_by_category``, :mod:`autotune.analysis.categories`); the mix math is
:mod:`autotune.analysis.mix`. Pure functions over profile dataclasses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from autotune.analysis.mix import MixFigures, check_mix, figures_for_mix, own_mix, tokens_per_request
from autotune.profiles.data import DeploymentProfile
from autotune.store.results import TrialRow

MIX_FIGURES = ("tokens_per_s", "tpot_ms_p50", "speedup")


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


def category_differences(by_category: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per pair of categories whose acceptance intervals do not overlap (they differ by
    more than the noise over their prompts), largest ratio first; [] otherwise."""
    lines = []
    names = sorted(by_category)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            high, low = sorted((by_category[a], by_category[b]), key=lambda e: -e["value"])
            if None in (high.get("low"), low.get("high")) or high["low"] <= low["high"]:
                continue
            top, bottom = (a, b) if high is by_category[a] else (b, a)
            ratio = high["value"] / low["value"]
            lines.append((ratio, f"acceptance differs by category beyond the noise: {top} {high['value']:.3g} "
                                 f"[{high['low']:.3g}, {high['high']:.3g}] against {bottom} {low['value']:.3g} "
                                 f"[{low['low']:.3g}, {low['high']:.3g}] tokens per pass ({ratio:.2f}x); "
                                 "a different mix of requests moves the figures (--mix)"))
    return [line for _, line in sorted(lines, key=lambda item: -item[0])]


def profile_mix(profile: DeploymentProfile, mix: Mapping[str, float]) -> MixFigures:
    """The profile's tokens/s, TPOT p50 and speedup carried over to ``mix`` (request shares by
    category); ConfigurationError when the profile has no categories or lacks one of the mix's."""
    by_category = profile_categories(profile)
    check_mix(mix, by_category, f"profile {profile.id}")
    return figures_for_mix(by_category, mix, {name: profile.estimate(name) for name in MIX_FIGURES})
