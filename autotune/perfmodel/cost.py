"""Cost profiles: what one decoding step and one prefill cost, apart from acceptance.

Hardware-dependent: a property of (hardware, engine, models). The points come from short timing
runs with forced acceptance (:mod:`autotune.engines.embedded.timing`) or from a roofline
(:mod:`autotune.perfmodel.roofline`); each is one (method, draft, depth, batch size): seconds per
step proposing and verifying, and the prefill of ``batch_size`` prompts.

Step time of a configuration at ``b`` active rows::

    none, draft, mtp:  T(depth, b) = propose(depth, b) + verify(depth, b)      timed together
    ngram:             T(depth, b) = propose_ngram(depth, b) + V(k, b)

where V(k, b) is the target verifying k tokens per row (taken from the baseline, k = 1, and the
draft-model points, k = depth + 1) and k the expected widest row of the step (the n-gram proposer
drafts only where it finds a match). That split needs the n-gram proposing time itself; an engine
that does not time it apart (TensorRT-LLM reports drafting latency only for a two-model drafter, so
its n-gram points carry ``propose_s`` 0 and the whole step in ``verify_s``: see
:mod:`autotune.engines.trtllm.timing`) gets the n-gram points' own step grid, like the other methods. MTP's verify is its own: committing a step also runs the MTP
modules over the accepted tokens. Depths and batch sizes between timed ones are interpolated
linearly (a draft step costs depth draft passes, so propose is close to linear in depth), beyond
the largest linearly extrapolated, below the smallest held flat.

``summary()`` gives the factored view the issue of the model asks for: the target's step time per
batch size and verified tokens, the proposer's per-token step time (the slope of propose over
depth), and the fixed per-step part (its intercept).

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


@dataclass(frozen=True)
class CostPoint:
    """One timed (or modelled) point; times in seconds, per step except ``prefill_s``."""

    method: str
    draft: str | None
    depth: int
    batch_size: int
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


class _Grid:
    """Mean values over rounds on a (depth, batch size) grid, interpolated in both."""

    def __init__(self, values: Mapping[tuple[int, int], list[float]]) -> None:
        mean = {key: statistics.fmean(v) for key, v in values.items()}
        self.depths = sorted({d for d, _ in mean})
        # Per depth, the timed batch sizes and their means, sorted once: ``at`` runs every simulated step.
        self.rows = []
        for d in self.depths:
            sizes = sorted(b for dd, b in mean if dd == d)
            self.rows.append((sizes, [mean[(d, b)] for b in sizes]))
        self.spreads = [statistics.stdev(v) / statistics.fmean(v) for v in values.values()
                        if len(v) > 1 and statistics.fmean(v) > 0]

    def at(self, depth: float, batch_size: float) -> float:
        by_depth = [interpolate(sizes, means, batch_size) for sizes, means in self.rows]
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
        step: dict[tuple[str, str | None], dict[tuple[int, int], list[float]]] = defaultdict(lambda: defaultdict(list))
        propose: dict[tuple[str, str | None], dict[tuple[int, int], list[float]]] = defaultdict(lambda: defaultdict(list))
        verify: dict[tuple[int, int], list[float]] = defaultdict(list)
        for p in self.points:
            step[p.proposer][(p.depth, p.batch_size)].append(p.step_s)
            propose[p.proposer][(p.depth, p.batch_size)].append(p.propose_s)
            if p.method in (BASELINE, "draft"):
                verify[(p.depth + 1, p.batch_size)].append(p.verify_s)
        self._step = {key: _Grid(v) for key, v in step.items()}
        self._propose = {key: _Grid(v) for key, v in propose.items()}
        # Proposers whose proposing was timed apart (module doc: the n-gram split needs it).
        self._propose_timed = {p.proposer for p in self.points if p.propose_s > 0}
        self._verify = _Grid(verify) if len({k for k, _ in verify}) > 1 else None
        self._prefill = {key: _linear_fit([(p.prefill_tokens, p.prefill_s) for p in self.points if p.proposer == key])
                         for key in self._step}

    def proposers(self) -> list[tuple[str, str | None]]:
        return sorted(self._step, key=lambda key: (key[0], key[1] or ""))

    def has(self, method: str, draft: str | None = None) -> bool:
        return (method, draft if method == "draft" else None) in self._step

    def step_s(self, method: str, draft: str | None, depth: int, batch_size: float, width: float | None = None) -> float:
        """Seconds per step at ``batch_size`` active rows; ``width`` (n-gram): expected verified
        tokens of the widest row, default depth + 1."""
        key = (method, draft if method == "draft" else None)
        if key not in self._step:
            raise KeyError(f"no timing for {method}{'' if key[1] is None else ':' + key[1]}")
        if method == "ngram" and self._verify is not None and key in self._propose_timed:
            k = depth + 1 if width is None else width
            return self._propose[key].at(depth, batch_size) + self._verify.at(k, batch_size)
        return self._step[key].at(depth, batch_size)

    def prefill_s(self, method: str, draft: str | None, tokens: float) -> float:
        """Seconds to prefill a batch of ``tokens`` padded prompt tokens (rows x longest prompt)."""
        intercept, slope = self._prefill[(method, draft if method == "draft" else None)]
        return max(intercept + slope * tokens, 0.0)

    @property
    def spread(self) -> float:
        """Relative standard deviation of a timed step between rounds (median over points; 0 for a
        roofline unless given to the constructor): the cost part of a prediction's uncertainty."""
        if self._fixed_spread is not None:
            return self._fixed_spread
        spreads = [s for grid in self._step.values() for s in grid.spreads]
        return statistics.median(spreads) if spreads else 0.0

    def summary(self) -> dict[str, Any]:
        """The factored view: target verify time by (batch size, tokens per row), and per proposer
        the per-token draft step (slope over depth) and fixed part (intercept), per batch size."""
        sizes = sorted({p.batch_size for p in self.points})
        verify = {}
        for b in sizes:
            base = [p.verify_s for p in self.points if p.method == BASELINE and p.batch_size == b]
            verify[b] = {1: statistics.fmean(base)} if base else {}
            for p in self.points:
                if p.method == "draft" and p.batch_size == b:
                    verify[b].setdefault(p.depth + 1, statistics.fmean(
                        [q.verify_s for q in self.points if q.proposer == p.proposer and q.depth == p.depth and q.batch_size == b]))
        proposers = {}
        for key in self.proposers():
            if key[0] == BASELINE:
                continue
            per_batch = {}
            for b in sizes:
                pairs = [(p.depth, p.propose_s) for p in self.points if p.proposer == key and p.batch_size == b]
                if pairs:
                    intercept, slope = _linear_fit(pairs)
                    per_batch[b] = {"per_token_s": slope, "fixed_s": intercept}
            proposers[key[0] if key[1] is None else f"{key[0]}:{key[1]}"] = per_batch
        return {"source": self.source, "verify_s": verify, "propose": proposers, "spread": self.spread}

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
