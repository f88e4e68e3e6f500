"""Errors of the profile commands (to move into :mod:`autotune.errors` once the coordinator adds them)."""

from autotune.errors import ConfigurationError


class ProfileNotFoundError(ConfigurationError):
    """No stored profile matches the request; the message names the nearest stored match."""


class OutputExistsError(ConfigurationError):
    """An export or report would overwrite an existing file without ``force``."""
