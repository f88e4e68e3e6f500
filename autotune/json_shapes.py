"""The JSON the read commands print with ``--json``, shared by the CLI and the HTTP service so
that both say the same thing in the same shape.

Where a result has one ``to_dict()`` (a best profile, a plan, a trial listing's ``row_dicts()``)
callers use it directly; this module holds the shapes that are more than that, and the encoder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from autotune.serving.off_depths import off_state_report

if TYPE_CHECKING:
    from autotune.profiles import DeploymentProfile
    from autotune.search import StudySummary
    from autotune.validation import ValidationResult


def dumps(data: Any) -> str:
    """``data`` as the CLI prints it: indented, anything JSON lacks (datetimes, paths) as ``str``."""
    return json.dumps(data, indent=2, default=str)


def study_list(studies: Sequence[StudySummary]) -> list[dict[str, Any]]:
    """``autotune studies --json``."""
    return [study.to_dict() for study in studies]


def profile_list(profiles: Sequence[DeploymentProfile]) -> list[dict[str, Any]]:
    """``autotune profiles list --json``: one summary per profile."""
    return [profile.summary() for profile in profiles]


def profile_detail(profile: DeploymentProfile, off_state: Any = None,
                   validations: Sequence[ValidationResult] = (), mix: Any = None) -> dict[str, Any]:
    """``autotune profiles show --json``: the profile, whether confirmation measured it, its ties,
    where none won what each engine's speculative server runs instead (``off_state``, from
    :func:`autotune.serving.off_depths.off_state_report`; computed here when not given), and how it
    held when served (``validations``, newest first: :func:`autotune.api.profile_validations`);
    its configuration's acceptance per request category (None: no categories) and, with ``--mix``,
    its figures for that mix (``mix``: :class:`autotune.analysis.mix.MixFigures`)."""
    from autotune.profiles.categories import category_differences, category_rows, profile_categories

    if off_state is None:
        off_state = off_state_report(profile)
    by_category = profile_categories(profile)
    return {**profile.to_dict(), "confirmed": profile.confirmed, "tied_with": profile.tied_with,
            "off_state": off_state, "validations": [validation.to_dict() for validation in validations],
            "acceptance_by_category": category_rows(by_category) if by_category else None,
            "acceptance_differences": category_differences(by_category) if by_category else [],
            **({"mix": mix.to_dict()} if mix is not None else {})}
