"""Model roots: the folders a queued tune may read files from (issue 23, item 3).

A job names files (the target, the drafts, a workload) on the machine that runs it. The worker is
given its roots (``--model-root``, repeatable, or ``AUTOTUNE_MODEL_ROOTS``, separated by
``os.pathsep``) and refuses a job whose files lie elsewhere; ``autotune serve`` given the same
roots refuses it already at ``POST /v1/tune`` (422). A path is resolved first (symlinks followed,
``..`` collapsed), so neither a link nor ``..`` leads out of a root. The built-in models and
workload name no file and are always allowed. Without roots nothing but the built-ins is allowed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from autotune.errors import InvalidOption

ENV_MODEL_ROOTS = "AUTOTUNE_MODEL_ROOTS"


class OutsideModelRoots(InvalidOption):
    """A job names a file outside the model roots; ``field`` is the request field that names it."""


@dataclass(frozen=True)
class ModelRoots:
    """The resolved root folders (none: only the built-ins are allowed)."""

    folders: tuple[Path, ...]

    @classmethod
    def of(cls, given: Iterable[str] = ()) -> ModelRoots:
        """The roots given (``--model-root``), else those of ``AUTOTUNE_MODEL_ROOTS``."""
        given = list(given) or [p for p in os.environ.get(ENV_MODEL_ROOTS, "").split(os.pathsep) if p]
        return cls(tuple(Path(folder).expanduser().resolve() for folder in given))

    def check(self, paths: dict[str, list[str]]) -> None:
        """OutsideModelRoots for the first path (by request field) that does not resolve to a
        place under one of the roots."""
        for field, values in paths.items():
            for value in values:
                resolved = Path(value).expanduser().resolve()
                if not any(resolved.is_relative_to(root) for root in self.folders):
                    # The roots themselves are not named: the message reaches HTTP clients.
                    rule = ("a job may read files only under the model roots" if self.folders else
                            "no model roots are configured, so a job may read no file of its own")
                    raise OutsideModelRoots(f"{field} {value!r} is not allowed: {rule} (--model-root, "
                                            f"{ENV_MODEL_ROOTS}); the built-in models and workload are always "
                                            "allowed", field)
