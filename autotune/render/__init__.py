"""Human-readable output: rich tables and spinners for the CLI's results (no click here).

:mod:`~autotune.render.console` holds the consoles and the table printer, :mod:`~autotune.render.formats`
the numbers in words; one module per command family prints its results.
"""

from autotune.render.console import PLAIN, print_lines, print_rows, status_spinner, stdout
from autotune.render.formats import (
    format_error,
    format_estimate,
    format_prediction,
    format_speedup,
    format_value,
    short_hardware,
    table_estimate,
)
from autotune.render.measure import print_measure
from autotune.render.plan import print_plan
from autotune.render.profiles import (
    OFF_STATE_COLUMNS,
    PROFILE_COLUMNS,
    print_categories,
    print_mix,
    print_profile,
    print_profiles,
)
from autotune.render.status import print_probe, print_schema_status
from autotune.render.studies import (
    PREDICTION_COLUMNS,
    STUDY_COLUMNS,
    TRIAL_COLUMNS,
    print_studies,
    print_trials,
    trial_notes,
)

__all__ = [
    "OFF_STATE_COLUMNS", "PLAIN", "PREDICTION_COLUMNS", "PROFILE_COLUMNS", "STUDY_COLUMNS", "TRIAL_COLUMNS",
    "format_error", "format_estimate", "format_prediction", "format_speedup", "format_value", "print_categories",
    "print_lines", "print_measure", "print_mix", "print_plan", "print_probe", "print_profile", "print_profiles",
    "print_rows", "print_schema_status", "print_studies", "print_trials", "short_hardware", "status_spinner",
    "stdout", "table_estimate", "trial_notes",
]
