"""What "speculation off at concurrency b" means inside one engine's speculative server.

A study that finds no speculation (method none) fastest at some concurrency measured a server
*without* a drafter. A speculative server cannot become that server at run time: what it runs there
instead is the engine's own business, so each engine adapter holds an :class:`OffRule` (its
``off_rule`` attribute) and the serving writers ask it (:mod:`autotune.serving.offstate`) rather
than testing engine names.

Pure data: no engine is imported.
"""

from __future__ import annotations

from dataclasses import dataclass

# TrialRow.extra key of a row that measured "K = 0 inside a speculative server": the method's
# drafter loaded and running, zero draft tokens scheduled (depth 0 with a speculative method).
# Defined with the decisions, on the ground floor, which must keep such a row from deciding.
from autotune.analysis.decision import OFF_STATE_KEY

__all__ = ["OFF_STATE_KEY", "OffRule"]


@dataclass(frozen=True)
class OffRule:
    """One engine's meaning of "off": ``floored_kinds`` (speculative kinds, :mod:`autotune.models.kind`
    names plus ``mtp`` / ``ngram``) never run below draft length 1 in that engine's server;
    ``zero_needs_measurement``: a draft length of 0 is written only where a row measured it (it is
    not free, so an unmeasured 0 would pass off an unknown cost as "none"). ``source``: why, with
    the engine sources read, one line for the exports' comments."""

    engine: str
    title: str
    floored_kinds: frozenset[str]
    zero_needs_measurement: bool
    source: str

    def floor(self, kind: str) -> int:
        """The smallest draft length ``kind`` may be given in this engine's server (0 or 1)."""
        return 1 if kind in self.floored_kinds else 0

    def zero_allowed(self, kind: str, zero_measured: bool) -> bool:
        """Whether a draft length of 0 may be written for ``kind``, given whether it was measured."""
        return self.floor(kind) == 0 and (zero_measured or not self.zero_needs_measurement)
