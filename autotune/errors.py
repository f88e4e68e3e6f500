"""Exception types whose message is written for the user.

Every error the CLI reports as one line derives from :class:`AutotuneError`; its ``str()`` says
what is wrong and, where possible, how to fix it.  Anything else that escapes is a bug.
"""


class AutotuneError(Exception):
    """Base class: a problem the user can act on (bad input, unreachable service, ...)."""


class ConfigurationError(AutotuneError):
    """An invalid option or combination of options."""


class DatabaseError(AutotuneError):
    """The database URL is malformed, the server unreachable, or the schema at the wrong revision."""


class ProbeError(AutotuneError):
    """The hardware probe could not measure this machine."""


class WorkloadError(AutotuneError):
    """A workload file is missing or malformed."""


class EngineError(AutotuneError):
    """An engine failed to load a configuration or to run a workload."""


class UnsupportedConfigError(EngineError):
    """The engine cannot run this (method, draft, depth, concurrency) combination."""


class InvalidOption(ConfigurationError):
    """A request refused for one of its fields: ``field`` names it (None: a combination of them)."""

    def __init__(self, message: str, field: str | None) -> None:
        super().__init__(message)
        self.field = field


class NotFoundError(ConfigurationError):
    """A named thing (study, profile, model, hardware) is neither stored nor in the catalog; the
    message names what is. The service answers it with 404, every other ConfigurationError with 422."""


class ProfileNotFoundError(NotFoundError):
    """No stored profile matches the request; the message names the nearest stored match."""


class OutputExistsError(ConfigurationError):
    """An export or report would overwrite an existing file without ``force``."""
