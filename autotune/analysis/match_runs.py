"""Acceptance at shallower depths, replayed over one run's runs of matching drafts.

With greedy chain drafting, the draft for text position t, given the correct prefix, is taken to be
the same whatever the depth, so each position either matches the target's token or not (m_t). A
run of L matches followed by a miss is L + 1 positions; a depth-k run steps over it in

    ceil((L + 1) / (k + 1))

sequence-steps (each step accepts up to k matches and adds one target token, which at worst takes
the miss's place), and the next step starts at the next run whatever k is. So the acceptance
length at depth k is total positions / sum of those steps over the runs, and a depth-D run gives
it for every k <= D from the lengths of its match runs.

A depth-D run sees those lengths with gaps: a step that accepts all D drafts adds the target's
token at position D + 1 without a draft there, so whether the run of matches went on is unseen.
Such a step is *censored*; ``chains[(j, a)]`` counts the stretches of j censored steps followed by
one that ended the run: ``a`` accepted drafts, then a miss (a rejected draft, or no draft at all
where an n-gram proposer's match ran out); a request's last stretch ends at its last step, with
``a = D`` when that step was censored. Each unseen position is a match with probability ``bonus``
(the run's a_D / a_(D-1): how often a step that accepted D - 1 drafts accepted the D-th), and
:func:`replayed_acceptance_lengths` takes the expected number of steps over those guesses, so
it is deterministic. At k = D the replay gives the run's own acceptance length.

Why not read depth k off the deep run position by position (a_i = P(a step accepts >= i drafts),
:mod:`autotune.perfmodel.acceptance`): a deep run's steps start right after a miss more often
than a shallow run's, where matches are rarer when they come in runs; docs/benchmarks.md ("Why
the model under-predicts shallow depths") measures both (``bench/bench_acceptance_replay.py``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

Chains = Mapping[tuple[int, int], int]  # (censored steps j, accepted drafts a of the ending step) -> count


@dataclass
class ChainCounter:
    """Counts a depth-``depth`` run's chains (see the module doc) as its steps come, per request."""

    depth: int
    chains: Counter[tuple[int, int]] = field(default_factory=Counter)
    _open: dict[int, int] = field(default_factory=dict)  # request -> censored steps since its last miss

    def step(self, request: int, drafted: int, accepted: int) -> None:
        if accepted == drafted == self.depth:
            self._open[request] = self._open.get(request, 0) + 1
        else:
            self.chains[(self._open.pop(request, 0), accepted)] += 1

    def closed(self) -> Counter[tuple[int, int]]:
        """The chains, with every request's open stretch ended at its last (censored) step."""
        chains = Counter(self.chains)
        for censored in self._open.values():
            chains[(censored - 1, self.depth)] += 1
        return chains


def continuation(accepted_by_position: Sequence[int], sequence_steps: int) -> float:
    """a_D / a_(D-1) from accepted counts by draft position: the chance that a step which matched
    its first D - 1 drafts matched the D-th too (a_0 = 1: every step)."""
    if not accepted_by_position:
        return 0.0
    before = accepted_by_position[-2] if len(accepted_by_position) > 1 else sequence_steps
    return min(1.0, accepted_by_position[-1] / before) if before else 0.0


def replayed_acceptance_lengths(chains: Chains, depth: int, bonus: float) -> list[float]:
    """Tokens per sequence-step at depths 1..``depth``, replayed over a depth-``depth`` run's
    ``chains`` with each unseen position a match with probability ``bonus``; [] without steps."""
    positions = 0
    steps = [0.0] * depth
    for (censored, accepted), count in chains.items():
        # Cut points after each censored step: at i (D + 1) for i = 1..j, each a miss with
        # probability 1 - bonus; the stretch's end is certain.
        ends = [(i + 1) * (depth + 1) for i in range(censored)] + [censored * (depth + 1) + accepted + 1]
        positions += count * ends[-1]
        for k in range(1, depth + 1):
            steps[k - 1] += count * _expected_steps(ends, k, bonus)
    return [positions / s for s in steps] if positions else []


def _expected_steps(ends: list[int], depth: int, bonus: float) -> float:
    """Expected depth-``depth`` steps over one stretch: the sum over the pieces [start, end) it may
    split into of P(the piece) x ceil(length / (depth + 1))."""
    miss = 1.0 - bonus
    total = 0.0
    for s, start in enumerate([0] + ends[:-1]):
        opened = 1.0 if s == 0 else miss  # a piece starts at the stretch's start or after a miss
        for e in range(s, len(ends)):
            closed = 1.0 if e == len(ends) - 1 else miss
            probability = opened * bonus ** (e - s) * closed
            total += probability * math.ceil((ends[e] - start) / (depth + 1))
    return total
