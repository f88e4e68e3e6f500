"""The off state: what "speculation off at concurrency b" means inside one engine's speculative server.

A study that finds no speculation (method none) fastest at some concurrency measured a server
*without* a drafter. A speculative server cannot become that server at run time: what it runs there
instead is the engine's own business, so each engine adapter holds an :class:`OffRule` (its
``off_rule`` attribute) and the serving writers ask it (:mod:`autotune.serving.off_depths`) rather
than testing engine names.

Pure data on the ground floor: the study marks the rows that measured the off state
(:data:`OFF_STATE_KEY`), the decisions keep them from deciding (:mod:`autotune.analysis.decision`),
the engine adapters hold their :class:`OffRule`, and the serving writers price and write it.
"""

from __future__ import annotations

from dataclasses import dataclass

# TrialRow.extra key of a K = 0 row: a speculative method at depth 0, its drafter loaded and kept in
# step, no token drafted (what a speculative server runs where its schedule says 0). Such a row
# prices that off state (autotune/serving/off_depths.py) and never decides (decision.deciding_rows).
OFF_STATE_KEY = "off_state"


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
