"""Cost profiles: what one decoding step and one prefill cost, apart from acceptance.

Hardware-dependent: a property of (hardware, engine, models). The points come from short timing
runs with forced acceptance (:mod:`autotune.engines.embedded.timing`) or from a roofline
(:mod:`autotune.perfmodel.roofline`); each is one (method, draft, depth, concurrency): seconds per
step proposing and verifying, and the prefill of ``concurrency`` prompts.

Step time of a configuration at ``b`` active rows::

    none, draft, mtp:  T(depth, b) = propose(depth, b) + verify(depth, b)      timed together
    ngram:             T(depth, b) = propose_ngram(depth, b) + V(k, b)

where V(k, b) is the target verifying k tokens per row (taken from the baseline, k = 1, and the
draft-model points, k = depth + 1) and k the expected widest row of the step (the n-gram proposer
drafts only where it finds a match). That split needs the n-gram proposing time itself; an engine
that does not time it apart (TensorRT-LLM reports drafting latency only for a two-model drafter, so
its n-gram points carry ``propose_s`` 0 and the whole step in ``verify_s``: see
:mod:`autotune.engines.trtllm.timing`) gets the n-gram points' own step grid, like the other methods. MTP's verify is its own: committing a step also runs the MTP
modules over the accepted tokens. Depths and concurrency levels between timed ones are interpolated
linearly (a draft step costs depth draft passes, so propose is close to linear in depth), beyond
the largest linearly extrapolated, below the smallest held flat.

``summary()`` gives the factored view the issue of the model asks for: the target's step time per
concurrency and verified tokens, the proposer's per-token step time (the slope of propose over
depth), and the fixed per-step part (its intercept).

Rounds: every point is timed in several rounds (at least ``MIN_ROUNDS``). A round slower than
``SLOW_ROUND`` x the point's fastest round was disturbed (another process took the cores; on our
2-core machine one such round was 17x the other) and is dropped and counted (``dropped_rounds``);
the point's value is the median of the kept rounds (a mean is pulled by the one slow round that
survives the cut; the median of 3+ rounds is not), and the spread (the cost part of a prediction's
uncertainty) is the relative standard deviation of the kept rounds, pooled over points by root
mean square (a median over points would hide the noisy ones). Rules and reasons: docs/statistics.md.

Prefill: a linear fit ``a + c * rows * longest prompt`` per proposer (draft models and MTP modules
prefill the prompt too).
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

BASELINE = "none"
MIN_ROUNDS = 3  # timing rounds per point: the median and the slow-round cut need three
SLOW_ROUND = 1.3  # a round slower than this x the point's fastest is dropped (module doc)


@dataclass(frozen=True)
class CostPoint:
    """One timed (or modelled) point; times in seconds, per step except ``prefill_s``."""

    method: str
    draft: str | None
    depth: int
    concurrency: int
    propose_s: float
    verify_s: float
    prefill_s: float
    prefill_tokens: int
    drafted_per_step: float = 0.0
    round: int = 0
    steps: int = 0

    @property
    def step_s(self) -> float:
        return self.propose_s + self.verify_s

    @property
    def proposer(self) -> tuple[str, str | None]:
        return self.method, self.draft

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CostPoint:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


def interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """Piecewise-linear y(x) through sorted ``xs``: flat below the first, linear beyond the last."""
    if len(xs) == 1 or x <= xs[0]:
        return ys[0]
    i = bisect_left(xs, x)
    if i < len(xs) and xs[i] == x:
        return ys[i]
    if i >= len(xs):
        i = len(xs) - 1
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return max(y0 + (y1 - y0) * (x - x0) / (x1 - x0), 0.0)


@dataclass(frozen=True)
class Rounds:
    """One point's timing rounds after the slow-round cut (see the module doc)."""

    kept: tuple[CostPoint, ...]
    dropped: int

    @classmethod
    def of(cls, rounds: Sequence[CostPoint]) -> Rounds:
        fastest = min(p.step_s for p in rounds)
        kept = tuple(p for p in rounds if p.step_s <= SLOW_ROUND * fastest)
        return cls(kept, len(rounds) - len(kept))

    def median(self, field: str) -> float:
        return statistics.median(getattr(p, field) for p in self.kept)

    @property
    def spread(self) -> float | None:
        """Relative standard deviation of the kept rounds' step time, None with fewer than two."""
        steps = [p.step_s for p in self.kept]
        if len(steps) < 2 or statistics.fmean(steps) <= 0:
            return None
        return statistics.stdev(steps) / statistics.fmean(steps)


class _Grid:
    """Values on a (depth, concurrency) grid, interpolated in both."""

    def __init__(self, values: Mapping[tuple[int, int], float]) -> None:
        self.depths = sorted({d for d, _ in values})
        # Per depth, the timed concurrency levels and their values, sorted once: ``at`` runs every simulated step.
        self.rows = []
        for d in self.depths:
            sizes = sorted(b for dd, b in values if dd == d)
            self.rows.append((sizes, [values[(d, b)] for b in sizes]))

    def at(self, depth: float, concurrency: float) -> float:
        by_depth = [interpolate(sizes, means, concurrency) for sizes, means in self.rows]
        return interpolate(self.depths, by_depth, depth)


class CostProfile:
    """Step and prefill costs from a set of :class:`CostPoint` (see the module doc)."""

    def __init__(self, points: Iterable[CostPoint], source: str = "timed", spread: float | None = None) -> None:
        self.points = list(points)
        self.source = source
        # A fixed relative uncertainty for points that were not timed (a roofline's), used instead
        # of the spread between timing rounds when given.
        self._fixed_spread = spread
        if not any(p.method == BASELINE for p in self.points):
            raise ValueError("a cost profile needs the baseline's points (method none)")
        by_point: dict[tuple[str, str | None, int, int], list[CostPoint]] = defaultdict(list)
        for p in self.points:
            by_point[(*p.proposer, p.depth, p.concurrency)].append(p)
        self.rounds = {key: Rounds.of(rounds) for key, rounds in by_point.items()}
        step: dict[tuple[str, str | None], dict[tuple[int, int], float]] = defaultdict(dict)
        propose: dict[tuple[str, str | None], dict[tuple[int, int], float]] = defaultdict(dict)
        verify: dict[tuple[int, int], list[float]] = defaultdict(list)
        for (method, draft, depth, concurrency), rounds in self.rounds.items():
            step[(method, draft)][(depth, concurrency)] = rounds.median("step_s")
            propose[(method, draft)][(depth, concurrency)] = rounds.median("propose_s")
            if method in (BASELINE, "draft"):
                verify[(depth + 1, concurrency)] += [p.verify_s for p in rounds.kept]  # every draft times it
        self._step = {key: _Grid(v) for key, v in step.items()}
        self._propose = {key: _Grid(v) for key, v in propose.items()}
        # Proposers whose proposing was timed apart (module doc: the n-gram split needs it).
        self._propose_timed = {p.proposer for p in self.points if p.propose_s > 0}
        self._verify = (_Grid({key: statistics.median(v) for key, v in verify.items()})
                        if len({k for k, _ in verify}) > 1 else None)
        kept = [p for rounds in self.rounds.values() for p in rounds.kept]
        self._prefill = {key: _linear_fit([(p.prefill_tokens, p.prefill_s) for p in kept if p.proposer == key])
                         for key in self._step}

    def proposers(self) -> list[tuple[str, str | None]]:
        return sorted(self._step, key=lambda key: (key[0], key[1] or ""))

    def has(self, method: str, draft: str | None = None) -> bool:
        return (method, draft if method == "draft" else None) in self._step

    def step_s(self, method: str, draft: str | None, depth: int, concurrency: float, width: float | None = None) -> float:
        """Seconds per step at ``concurrency`` active rows; ``width`` (n-gram): expected verified
        tokens of the widest row, default depth + 1."""
        key = (method, draft if method == "draft" else None)
        if key not in self._step:
            raise KeyError(f"no timing for {method}{'' if key[1] is None else ':' + key[1]}")
        if method == "ngram" and self._verify is not None and key in self._propose_timed:
            k = depth + 1 if width is None else width
            return self._propose[key].at(depth, concurrency) + self._verify.at(k, concurrency)
        return self._step[key].at(depth, concurrency)

    def prefill_s(self, method: str, draft: str | None, tokens: float) -> float:
        """Seconds to prefill a batch of ``tokens`` padded prompt tokens (rows x longest prompt)."""
        intercept, slope = self._prefill[(method, draft if method == "draft" else None)]
        return max(intercept + slope * tokens, 0.0)

    @property
    def spread(self) -> float:
        """Relative standard deviation of a timed step between kept rounds (root mean square over
        points; 0 for a roofline unless given to the constructor): the cost part of a prediction's
        uncertainty, and this machine's pass-to-pass noise (see :mod:`autotune.search.guide`)."""
        if self._fixed_spread is not None:
            return self._fixed_spread
        spreads = [r.spread for r in self.rounds.values() if r.spread is not None]
        return math.sqrt(statistics.fmean(s * s for s in spreads)) if spreads else 0.0

    @property
    def dropped_rounds(self) -> int:
        """Timing rounds dropped as disturbed (slower than SLOW_ROUND x their point's fastest)."""
        return sum(r.dropped for r in self.rounds.values())

    def summary(self) -> dict[str, Any]:
        """The factored view: target verify time by (concurrency, tokens per row), and per proposer
        the per-token draft step (slope over depth) and fixed part (intercept), per concurrency."""
        sizes = sorted({p.concurrency for p in self.points})
        verify: dict[int, dict[int, float]] = {b: {} for b in sizes}
        pairs: dict[tuple[str, str | None], dict[int, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
        # Sorted by method, draft, depth: a width timed by several drafts takes the first draft's.
        ordered = sorted(self.rounds.items(), key=lambda item: (item[0][0], item[0][1] or "", *item[0][2:]))
        for (method, draft, depth, b), rounds in ordered:
            if method in (BASELINE, "draft"):
                verify[b].setdefault(depth + 1, rounds.median("verify_s"))
            if method != BASELINE:
                pairs[(method, draft)][b].append((depth, rounds.median("propose_s")))
        proposers = {}
        for key, per_size in pairs.items():
            per_batch = {}
            for b, points in sorted(per_size.items()):
                intercept, slope = _linear_fit(points)
                per_batch[b] = {"per_token_s": slope, "fixed_s": intercept}
            proposers[key[0] if key[1] is None else f"{key[0]}:{key[1]}"] = per_batch
        return {"source": self.source, "verify_s": verify, "propose": proposers, "spread": self.spread,
                "dropped_rounds": self.dropped_rounds}

    def to_points(self) -> list[dict[str, Any]]:
        return [p.to_dict() for p in self.points]


def _linear_fit(pairs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of y over x; a flat line where x does not vary."""
    xs = [x for x, _ in pairs]
    ys = [y for _, y in pairs]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    if sxx == 0 or math.isclose(sxx, 0.0):
        return mean_y, 0.0
    slope = sum((x - mean_x) * (y - mean_y) for x, y in pairs) / sxx
    return mean_y - slope * mean_x, slope
