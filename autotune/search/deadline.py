"""The study's wall-clock budget (``--timeout``): one deadline for screening and confirmation.

Checked before anything new starts (a trial, a re-measured screening pass, a confirmation
concurrency, a protocol round), never by killing what runs: a study overruns its budget by at most the
step under way, which ``--trial-timeout`` bounds. Rounds the protocol discards (a disturbed
machine) take time like any other, so they count against the budget too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Deadline:
    """``budget_s`` seconds from ``started`` (``time.monotonic()``); no budget: never passes."""

    started: float
    budget_s: float | None = None

    @classmethod
    def start(cls, budget_s: float | None) -> Deadline:
        return cls(time.monotonic(), budget_s)

    def left_s(self) -> float | None:
        """Seconds left (0 once passed), None without a budget."""
        return None if self.budget_s is None else max(0.0, self.started + self.budget_s - time.monotonic())

    def passed(self) -> bool:
        return self.left_s() == 0.0

    def in_time(self) -> bool:
        return not self.passed()
