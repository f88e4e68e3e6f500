"""The result of a preflight: a list of checks, each about the target or one draft.

A check's ``status`` is ``ok``, ``warn`` (works, but worth knowing) or ``error`` (the pairing or the
run would fail). ``subject`` names what the check is about: ``"target"`` or a draft's path, so that
the tuner can leave out exactly the drafts that failed (:func:`usable_drafts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.models.folder import ModelFolders
from autotune.models.support import Finding

STATUSES = ("ok", "warn", "error")
TARGET = "target"


@dataclass(frozen=True)
class Check:
    """One preflight finding. ``details`` is JSON-ready data behind the message."""

    name: str
    status: str
    message: str
    subject: str = TARGET
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check status must be one of {STATUSES}, got {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "status": self.status, "subject": self.subject, "message": self.message,
            "details": self.details,
        }


def finding_check(name: str, finding: Finding, subject: str = TARGET, details: dict[str, Any] | None = None) -> Check:
    """An engine's :class:`~autotune.models.support.Finding` as the check ``name``: the preflight's
    ``details`` first, then the engine's."""
    return Check(name, finding.status, finding.message, subject, {**(details or {}), **(finding.details or {})})


@dataclass(frozen=True)
class PreflightReport:
    """Every check of one preflight, in the order they ran, and the model folders it read (an
    unreadable draft is not among them), for the caller to reuse."""

    engine: str
    target: str
    drafts: tuple[str, ...]
    checks: tuple[Check, ...]
    models: ModelFolders = field(default_factory=ModelFolders, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        """True when no check is an error."""
        return all(check.status != "error" for check in self.checks)

    @property
    def target_errors(self) -> list[Check]:
        """Errors about the target itself: nothing can run until they are fixed."""
        return [c for c in self.checks if c.status == "error" and c.subject == TARGET]

    def for_subject(self, subject: str) -> list[Check]:
        return [c for c in self.checks if c.subject == subject]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``--json`` prints)."""
        return {
            "engine": self.engine,
            "target": self.target,
            "drafts": list(self.drafts),
            "ok": self.ok,
            "checks": [check.to_dict() for check in self.checks],
        }


def usable_drafts(report: PreflightReport) -> tuple[list[Path], dict[Path, str]]:
    """Split the report's drafts into those without errors and those to leave out, with the reasons
    (the error messages joined by ``"; "``). Errors about the target reject nothing here: they are
    the caller's to raise (see :attr:`PreflightReport.target_errors`)."""
    usable: list[Path] = []
    rejected: dict[Path, str] = {}
    for draft in report.drafts:
        errors = [c.message for c in report.for_subject(draft) if c.status == "error"]
        if errors:
            rejected[Path(draft)] = "; ".join(errors)
        else:
            usable.append(Path(draft))
    return usable, rejected
