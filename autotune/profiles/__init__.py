"""Deployment profiles: query the stored ones, move them between databases, read a study's trials.

    from autotune import profiles
    best = profiles.best_profile(None, "builtin-target", hardware="current", concurrency=8)
    print(best.deployment().label(), best.operating_point.tokens_per_s)

:mod:`.analysis` reads a profile's trials (the best configuration per concurrency, the serving
schedule, the Pareto front). Exporting to serving configs lives in :mod:`autotune.serving`, the
HTML report in :mod:`autotune.report`.
"""

from autotune.profiles.data import DeploymentProfile, HardwareInfo, ModelInfo, StudyInfo
from autotune.errors import OutputExistsError, ProfileNotFoundError
from autotune.profiles.query import BestProfile, best_profile, current_fingerprint, list_profiles, show_profile
from autotune.profiles.transfer import import_profile

__all__ = [
    "BestProfile",
    "DeploymentProfile",
    "HardwareInfo",
    "ModelInfo",
    "OutputExistsError",
    "ProfileNotFoundError",
    "StudyInfo",
    "best_profile",
    "current_fingerprint",
    "import_profile",
    "list_profiles",
    "show_profile",
]
