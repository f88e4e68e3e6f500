"""Acceptance profiles: how many drafted tokens a proposer gets accepted, by draft position.

Hardware-independent: a property of (target, proposer, workload). With greedy chain drafting the
first k drafts of a depth-D step are the drafts a depth-k step would make (a draft model and the
MTP modules draft one token after another; the n-gram proposer truncates the same match), so one
run at the maximum depth gives the curve of every smaller depth:

    a_i = P(a sequence-step accepts >= i drafts)       i = 1..D
    Omega(depth) = 1 + sum_{i <= depth} a_i            expected tokens per sequence-step

(the bonus token makes the 1). Runs at several depths pool: position i counts the sequence-steps
of every run that drafted at depth >= i. ``a_i`` is a proportion over ``steps`` sequence-steps;
its standard error sqrt(a (1 - a) / n) is summed over positions for Omega's (positions of one step
are positively correlated, so the sum is the conservative bound).

Where a run's steps were replayed (:mod:`autotune.analysis.match_runs`), position i also pools the
tokens and the replayed sequence-steps of a depth-i run, and Omega(i) is their ratio: read position
by position, a deep run's steps start after a miss more often than a shallow run's do, which
understates the shallow depths when matches come in runs. Only the n-gram proposer's replays are
used (:data:`REPLAYED`): on the shipped prose workload (c1, depth 8 replayed) they came within
-0.5 to +2.2 % of the acceptance measured at depths 1-7, where reading by position missed by 2-11 %.
For the draft model the replay runs 3-4 % high at depths 3-7 (unseen positions guessed too often as
matches), and no guided search has been run with it; for MTP, whose later drafts depend on where the
step started, it was worse than by position (docs/benchmarks.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

SPECULATIVE = ("mtp", "draft", "ngram")
REPLAYED = ("ngram",)  # the methods whose replayed acceptance the curves use (see the module doc)


def proposer_key(method: str, draft_fingerprint: str | None = None) -> str:
    """The proposer an acceptance profile belongs to: ``mtp``, ``ngram`` or ``draft:<fingerprint>``."""
    if method not in SPECULATIVE:
        raise ValueError(f"method {method!r} proposes nothing")
    return f"draft:{draft_fingerprint}" if method == "draft" else method


@dataclass(frozen=True)
class PositionCounts:
    """Draft position i: sequence-steps that could accept >= i drafts, did, and drafted >= i; and
    the tokens and (expected) sequence-steps of depth-i runs replayed over deeper or equal runs."""

    steps: int
    accepted: int
    drafted: int
    replay_tokens: float = 0.0
    replay_steps: float = 0.0

    def to_dict(self) -> dict[str, float]:
        data = {"steps": self.steps, "accepted": self.accepted, "drafted": self.drafted}
        if self.replay_steps:
            data |= {"replay_tokens": self.replay_tokens, "replay_steps": self.replay_steps}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PositionCounts:
        steps = int(data["steps"])
        return cls(steps, int(data["accepted"]), int(data.get("drafted", steps)),
                   float(data.get("replay_tokens", 0.0)), float(data.get("replay_steps", 0.0)))


def run_counts(acceptance_by_position: Sequence[float], drafted_by_position: Sequence[int] | None,
               sequence_steps: int, depth: int = 0, replayed: Sequence[float] = ()) -> list[PositionCounts]:
    """Counts by position of one run at ``depth``: ``acceptance_by_position[i]`` is accepted /
    drafted at draft position i+1; where the engine did not count the drafts, every sequence-step
    drafted. Positions up to ``depth`` that never drafted (an n-gram proposer that never found a
    long enough match) accepted nothing in all the run's sequence-steps. ``replayed[k-1]``: the
    acceptance length replayed at depth k; the run's tokens (its steps x its own depth's length,
    the last) over it are that depth's replayed steps."""
    counts = []
    for i, fraction in enumerate(acceptance_by_position):
        drafted = drafted_by_position[i] if drafted_by_position and i < len(drafted_by_position) else sequence_steps
        counts.append(PositionCounts(sequence_steps, round(fraction * drafted), drafted))
    counts += [PositionCounts(sequence_steps, 0, 0)] * (depth - len(counts))
    tokens = sequence_steps * replayed[-1] if replayed else 0.0
    for i, length in enumerate(replayed[: len(counts)]):
        counts[i] = replace(counts[i], replay_tokens=tokens, replay_steps=tokens / length)
    return counts


@dataclass(frozen=True)
class AcceptanceCurve:
    """Pooled counts by draft position of one proposer on one workload (see the module doc)."""

    proposer: str
    positions: tuple[PositionCounts, ...]
    sources: tuple[int, ...] = ()

    @property
    def max_depth(self) -> int:
        return len(self.positions)

    @property
    def steps(self) -> int:
        """Sequence-steps behind the first position (the most any position has)."""
        return self.positions[0].steps if self.positions else 0

    def rate(self, position: int) -> float:
        """a_i: the share of sequence-steps that accepted >= ``position`` drafts (1-based)."""
        counts = self.positions[position - 1]
        return counts.accepted / counts.steps if counts.steps else 0.0

    def drafted_rate(self, position: int) -> float:
        """The share of sequence-steps that drafted >= ``position`` tokens (below 1 for n-gram)."""
        counts = self.positions[position - 1]
        return counts.drafted / counts.steps if counts.steps else 0.0

    def covers(self, depth: int) -> bool:
        return depth <= self.max_depth and all(p.steps > 0 for p in self.positions[:depth])

    def omega(self, depth: int) -> float:
        """Expected tokens per sequence-step at ``depth`` (the acceptance length): the replayed
        tokens over the replayed steps where runs were replayed, else from the rates by position."""
        self._check(depth)
        counts = self.positions[depth - 1]
        if counts.replay_steps > 0:
            return counts.replay_tokens / counts.replay_steps
        return 1.0 + sum(self.rate(i) for i in range(1, depth + 1))

    def omega_se(self, depth: int) -> float:
        """Standard error of :meth:`omega` (the sum of the positions' binomial errors)."""
        self._check(depth)
        return sum(math.sqrt(max(self.rate(i) * (1 - self.rate(i)), 0.0) / self.positions[i - 1].steps)
                   for i in range(1, depth + 1))

    def omegas(self) -> list[float]:
        """Omega at depths 1..max_depth."""
        return [self.omega(depth) for depth in range(1, self.max_depth + 1)]

    def _check(self, depth: int) -> None:
        if not self.covers(depth):
            raise ValueError(f"the {self.proposer} acceptance profile covers depths 1..{self.max_depth}, not {depth}")

    def pooled(self, counts: Sequence[PositionCounts], source: int | None = None) -> AcceptanceCurve:
        """This curve with one more run's counts (a run already pooled, by ``source``, is skipped)."""
        if source is not None and source in self.sources:
            return self
        length = max(len(self.positions), len(counts))
        merged = []
        for i in range(length):
            mine = self.positions[i] if i < len(self.positions) else PositionCounts(0, 0, 0)
            theirs = counts[i] if i < len(counts) else PositionCounts(0, 0, 0)
            merged.append(PositionCounts(mine.steps + theirs.steps, mine.accepted + theirs.accepted,
                                         mine.drafted + theirs.drafted, mine.replay_tokens + theirs.replay_tokens,
                                         mine.replay_steps + theirs.replay_steps))
        sources = self.sources + ((source,) if source is not None else ())
        return AcceptanceCurve(self.proposer, tuple(merged), sources)

    def to_dict(self) -> dict[str, Any]:
        return {"proposer": self.proposer, "positions": [p.to_dict() for p in self.positions],
                "sources": list(self.sources)}

    @classmethod
    def from_positions(cls, proposer: str, positions: Iterable[Mapping[str, Any]],
                       sources: Iterable[int] = ()) -> AcceptanceCurve:
        return cls(proposer, tuple(PositionCounts.from_dict(p) for p in positions), tuple(sources))

    @classmethod
    def empty(cls, proposer: str) -> AcceptanceCurve:
        return cls(proposer, ())


def row_counts(row: Any) -> list[PositionCounts]:
    """Counts by position of a stored trial row (a ``TrialFigures`` with its measurement in ``extra``)."""
    measurement = (row.extra or {}).get("measurement") or {}
    steps = int(measurement.get("sequence_steps") or 0)
    replayed = (measurement.get("replayed_acceptance_length") or []) if row.method in REPLAYED else []
    return run_counts(row.acceptance_by_position or [], measurement.get("drafted_by_position"), steps, row.depth, replayed)
