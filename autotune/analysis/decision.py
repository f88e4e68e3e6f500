"""The one home of what a study's figures decide: baselines, ties, the configuration to deploy, the
best configuration at each concurrency, the per-method verdict and the Pareto front.

Used by the tuner (the profile it stores), the profile queries and exports (the serving schedule)
and the report; :mod:`autotune.analysis.summary` says the decision in words. Pure functions over rows of :class:`~autotune.store.results.TrialFigures` (stored
trials, or an exported profile's measurements): nothing here measures or writes.

**Which rows decide.** When a study has a confirmation run (the finalists re-measured with the full
protocol, see :mod:`autotune.engines.protocol`), its latest run decides; the screening trials (one
pass each) only chose the finalists. Without one, the screening trials stand, and every figure is
reported as one unconfirmed run (n = 1, no interval, no speedup).

**Ties.** Two confirmed configurations at one concurrency were measured in the same rounds, so
their tokens/s ratio has a paired 95 % interval (:func:`compare`). One beats another only when that
interval excludes 1. The leader is the configuration with the most tokens/s; every configuration
the paired comparison cannot separate from it is tied with it (a speculative one only while its
paired ratio is within :data:`PRACTICAL_MARGIN` of 1: an interval that reaches 1 after a few rounds
does not make a configuration 5 % behind as good), and among the tied the recommendation
follows operational simplicity (:data:`SIMPLICITY`): no speculation, then n-gram, then MTP, then a
draft model (each step adds a failure surface: the seed article's MTP-versus-draft argument), then
smaller depth, then less memory. The baseline is always measured in the confirmation rounds, so
where speculation's speedup interval does not clear 1.0x the baseline is tied with the leader and
the concurrency gets depth 0; a tied configuration whose own speedup interval does not clear 1.0x is
never the one recommended.

**Baselines.** The baseline at a concurrency is the method-none row of the deciding rows there; a
speedup is only ever the stored, paired one. Confirmed baselines that fail the neighbour check
(:func:`~autotune.analysis.plausibility.implausible_baselines`) mark their concurrency unreliable:
its speedups are not reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from autotune.analysis.intervals import Estimate, paired_by_round, paired_ratio_interval
from autotune.analysis.offstate import OFF_STATE_KEY

BASELINE = "none"
# Lower is simpler to operate; see the module doc.
SIMPLICITY = {"none": 0, "ngram": 1, "mtp": 2, "draft": 3}
# A speculative configuration more than this far behind the leader (paired ratio) is not tied with
# it, even where five rounds cannot exclude 1: two seeds of the guided benchmark recommended draft@4
# over draft@7 on a 0.956 ratio whose interval reached 1, and draft@4 proved 8.6 % slower
# (docs/benchmarks.md). The baseline keeps the plain rule: speculation not shown faster is not deployed.
PRACTICAL_MARGIN = 0.03
WHY_SIMPLER = {
    "none": "no speculation to deploy",
    "ngram": "no draft model or MTP heads to deploy",
    "mtp": "no second model to deploy",
}

Row = TypeVar("Row")  # a TrialFigures with method, depth, concurrency, draft, state, trial_number


# -- rows ------------------------------------------------------------------------------------------


def complete(rows: Iterable[Row]) -> list[Row]:
    """Rows that ran to the end and measured a throughput."""
    return [row for row in rows if row.state == "complete" and row.tokens_per_s is not None]


def config_label(row: Any) -> str:
    """``none``, ``mtp@2``, ``draft@3`` (``draft:<label>@3`` for a stored row with another draft)."""
    label = getattr(row, "config_label", None)
    if isinstance(label, str):
        return label
    return row.method if row.method == BASELINE else f"{row.method}@{row.depth}"


def confirmation_run(row: Any) -> int | None:
    """The confirmation run a row belongs to, None for a screening row."""
    if getattr(row, "phase", "screening") != "confirmation":
        return None
    return int((row.extra.get("confirmation") or {}).get("run", 1))


def deciding_rows(rows: Iterable[Row]) -> list[Row]:
    """The complete rows of the latest confirmation run, or the complete screening rows without one.
    A K = 0 row (``extra["off_state"]``: the off state of a speculative server, measured where none
    leads) never decides: it prices what the server runs there (autotune/serving/off_depths.py)."""
    done = [row for row in complete(rows) if not row.extra.get(OFF_STATE_KEY)]
    runs = [run for row in done if (run := confirmation_run(row)) is not None]
    if not runs:
        return [row for row in done if confirmation_run(row) is None]
    latest = max(runs)
    return [row for row in done if confirmation_run(row) == latest]


def screening_rows(rows: Iterable[Row]) -> list[Row]:
    """The complete screening rows (one pass per Optuna trial)."""
    return [row for row in complete(rows) if confirmation_run(row) is None]


def reliable(row: Any) -> bool:
    """False for rows whose concurrency failed the baseline neighbour check."""
    return not row.extra.get("implausible")


def compare(a: Any, b: Any) -> Estimate | None:
    """Paired tokens/s ratio a / b over the confirmation rounds both were measured in; None when
    they were not measured together (different runs or concurrency levels, or screening rows)."""
    if a is b:
        return Estimate(1.0, 1.0, 1.0, len(a.extra.get("samples") or [1]))
    run_a, run_b = confirmation_run(a), confirmation_run(b)
    if run_a is None or run_a != run_b or a.concurrency != b.concurrency:
        return None
    numerators, denominators = paired_by_round(a.extra.get("rounds") or [], a.extra.get("samples") or [],
                                               b.extra.get("rounds") or [], b.extra.get("samples") or [])
    if len(numerators) < 2:
        return None
    return paired_ratio_interval(numerators, denominators)


def simplicity(row: Any) -> tuple:
    """Sort key of operational simplicity (see :data:`SIMPLICITY`): method, depth, memory."""
    return (SIMPLICITY.get(row.method, len(SIMPLICITY)), row.depth, row.peak_memory_bytes or 0, -row.tokens_per_s)


def speedup_estimate(row: Any) -> Estimate | None:
    """The row's paired speedup with its interval (the baseline: exactly 1), None when unmeasured."""
    if row.method == BASELINE:  # exactly 1 against itself; an interval only where rounds were measured
        return Estimate(1.0, 1.0, 1.0, row.repetitions) if confirmation_run(row) is not None else Estimate.single(1.0)
    return row.estimate("speedup") if row.speedup is not None else None


def baselines(rows: Iterable[Row]) -> dict[int, Row]:
    """The baseline row at each concurrency among the deciding rows (the fastest, should a study
    hold several), by ascending concurrency."""
    found: dict[int, Row] = {}
    for row in deciding_rows(rows):
        if row.method == BASELINE and (row.concurrency not in found or row.tokens_per_s > found[row.concurrency].tokens_per_s):
            found[row.concurrency] = row
    return dict(sorted(found.items()))


def best_by_concurrency(rows: Iterable[Row]) -> dict[int, Row]:
    """The row with the most tokens/s at each concurrency, by ascending concurrency."""
    best: dict[int, Row] = {}
    for row in complete(rows):
        if row.concurrency not in best or row.tokens_per_s > best[row.concurrency].tokens_per_s:
            best[row.concurrency] = row
    return dict(sorted(best.items()))


# -- one concurrency --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConcurrencyDecision:
    """What one concurrency's figures decide.

    ``leader``: most tokens/s; ``tied``: the configurations the paired comparison cannot separate
    from it (leader included), simplest first; ``recommended``: the simplest of the tied;
    ``ratio_to_leader``: the recommended one's paired tokens/s ratio to the leader.
    """

    concurrency: int
    leader: Any
    tied: list[Any]
    recommended: Any
    baseline: Any | None
    ratio_to_leader: Estimate | None
    confirmed: bool

    @property
    def depth(self) -> int:
        """Draft tokens per step to serve at this concurrency (0: speculation off)."""
        return 0 if self.recommended.method == BASELINE else self.recommended.depth

    def tie_sentence(self) -> str | None:
        """"draft@7 and mtp@3 are within noise of each other (±4 %): recommending mtp@3 — no second
        model to deploy", or None when nothing is tied with the leader."""
        if len(self.tied) < 2:
            return None
        names = _join([config_label(self.leader)] + [config_label(r) for r in self.tied if r is not self.leader])
        widths = [c.relative_half_width for r in self.tied if r is not self.leader
                  if (c := compare(r, self.leader)) is not None and c.relative_half_width is not None]
        noise = f" (±{max(widths):.0%})" if widths else ""
        return (f"at concurrency {self.concurrency}, {names} are within noise of each other{noise}: recommending "
                f"{config_label(self.recommended)} — {_why(self.recommended, self.tied)}")


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _why(chosen: Any, tied: list[Any]) -> str:
    """Why ``chosen`` is the simplest of ``tied`` (the first step of the order that decides)."""
    others = [row for row in tied if row is not chosen]
    if any(SIMPLICITY.get(row.method, 9) > SIMPLICITY.get(chosen.method, 9) for row in others) and chosen.method in WHY_SIMPLER:
        return WHY_SIMPLER[chosen.method]
    if any(row.depth > chosen.depth for row in others):
        return "a smaller depth"
    return "less memory"


def decide_at(rows: Sequence[Any], concurrency: int, slo: Any = None) -> ConcurrencyDecision | None:
    """The decision at ``concurrency`` among the deciding ``rows`` (already filtered by
    :func:`deciding_rows`), under ``slo`` (an object with ``violation(row)``; None: no limits).
    None when nothing complete was measured there."""
    here = [row for row in rows if row.concurrency == concurrency]
    if not here:
        return None
    violation = (lambda row: slo.violation(row)) if slo is not None else (lambda row: 0.0)
    least = min(violation(row) for row in here)
    pool = [row for row in here if violation(row) == least]  # meeting the SLOs, or the closest misses
    leader = max(pool, key=lambda row: (row.tokens_per_s, -row.trial_number))
    tied = sorted((row for row in pool if _tied(row, leader)), key=simplicity)
    # Speculation is only recommended where its own interval clears 1.0x; the leader always
    # qualifies (when it does not clear 1.0x the baseline is tied with it and comes first).
    recommended = next((row for row in tied if row is leader or _clears_baseline(row)), leader)
    baseline = next((row for row in here if row.method == BASELINE), None)
    return ConcurrencyDecision(concurrency, leader, tied, recommended, baseline, compare(recommended, leader),
                         confirmation_run(leader) is not None)


def _clears_baseline(row: Any) -> bool:
    """The baseline itself, or a configuration whose speedup interval lies above 1 (a screening
    row, without an interval, is taken at its figure: nothing better is known)."""
    if row.method == BASELINE:
        return True
    speedup = speedup_estimate(row)
    if speedup is None or not speedup.has_interval:
        return True
    return speedup.low > 1


def _tied(row: Any, leader: Any) -> bool:
    """Whether ``row`` is tied with ``leader`` (see the module doc): the baseline when their paired
    interval reaches 1; a speculative configuration when it does and its paired ratio is within
    ``PRACTICAL_MARGIN`` of the leader's."""
    if row is leader:
        return True
    ratio = compare(row, leader)
    if ratio is None or ratio.excludes(1.0):
        return False
    return row.method == BASELINE or ratio.value >= 1 - PRACTICAL_MARGIN


# -- the study -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProfileChoice:
    """The recommended configuration, and whether it meets the SLOs (if not, the closest miss)."""

    row: Any
    slo_met: bool
    violation: float  # total relative excess over the SLO limits (0 when met)
    decision: ConcurrencyDecision | None = None

    def to_dict(self) -> dict[str, Any]:
        tied = [config_label(row) for row in self.decision.tied] if self.decision else []
        return {**self.row.to_dict(), "slo_met": self.slo_met, "slo_violation": self.violation, "tied_with": tied,
                "confirmed": self.decision.confirmed if self.decision else False}


def choose_profile(rows: Iterable[Any], slo: Any) -> ProfileChoice | None:
    """The configuration to deploy: the concurrency whose leader has the most tokens/s (among those
    meeting the SLOs, else the closest miss), and there the recommendation of the tie rule."""
    deciding = [row for row in deciding_rows(rows) if reliable(row)]
    if not deciding:
        return None
    decisions = [d for b in sorted({row.concurrency for row in deciding}) if (d := decide_at(deciding, b, slo))]
    best = min(decisions, key=lambda d: (slo.violation(d.leader), -d.leader.tokens_per_s))
    row = best.recommended
    violation = slo.violation(row)
    return ProfileChoice(row, violation == 0, violation, best)


@dataclass(frozen=True)
class ConcurrencyBest:
    """The recommendation at one concurrency (None fields: nothing complete there yet).

    ``depth`` is what a server should use there (0: no speculation); ``speedup_low``/``_high`` the
    paired 95 % interval; ``tied``: the configurations within noise of the leader; ``confirmed``:
    the figures come from the confirmation phase; ``note``: why figures are withheld, if they are.
    """

    concurrency: int
    baseline_tokens_per_s: float | None
    label: str | None
    method: str | None
    draft: str | None
    depth: int | None
    tokens_per_s: float | None
    speedup: float | None
    acceptance_rate: float | None
    acceptance_length: float | None
    slo_met: bool
    trials: int
    tokens_per_s_low: float | None = None
    tokens_per_s_high: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    repetitions: int = 1
    leader: str | None = None
    tied: list[str] = field(default_factory=list)
    confirmed: bool = False
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def per_concurrency(rows: Sequence[Any], concurrencies: Iterable[int], slo: Any) -> list[ConcurrencyBest]:
    """The recommendation at each concurrency (under ``slo``), with its paired speedup."""
    deciding = deciding_rows(rows)
    table = []
    for concurrency in concurrencies:
        decision = decide_at(deciding, concurrency, slo)
        trials = sum(1 for row in rows if row.concurrency == concurrency and confirmation_run(row) is None)
        if decision is None:
            table.append(ConcurrencyBest(concurrency, None, None, None, None, None, None, None, None, None, False, trials))
            continue
        row = decision.recommended
        withheld = not reliable(row)
        tokens = row.estimate("tokens_per_s")
        speedup = None if withheld else speedup_estimate(row)
        base = decision.baseline
        table.append(ConcurrencyBest(
            concurrency=concurrency, baseline_tokens_per_s=base.tokens_per_s if base is not None else None,
            label=config_label(row), method=row.method, draft=row.draft, depth=decision.depth,
            tokens_per_s=row.tokens_per_s, speedup=speedup.value if speedup else None,
            acceptance_rate=row.acceptance_rate, acceptance_length=row.acceptance_length,
            slo_met=slo.is_met(row), trials=trials, tokens_per_s_low=tokens.low, tokens_per_s_high=tokens.high,
            speedup_low=speedup.low if speedup else None, speedup_high=speedup.high if speedup else None,
            repetitions=getattr(row, "repetitions", 1), leader=config_label(decision.leader),
            tied=[config_label(r) for r in decision.tied], confirmed=decision.confirmed,
            note=row.extra.get("implausible") if withheld else None,
        ))
    return table


@dataclass(frozen=True)
class MethodVerdict:
    """How one method (one draft model, for method draft) fared: its best confirmed speedup (the
    screening tokens/s when it never reached the confirmation), acceptance and memory."""

    name: str  # none | mtp | draft | draft:<label> | ngram
    method: str
    draft: str | None
    trials: int
    best_label: str | None
    best_concurrency: int | None
    best_depth: int | None
    tokens_per_s: float | None
    speedup: float | None
    acceptance_rate: float | None
    acceptance_length: float | None
    memory_overhead_bytes: int | None  # peak memory over the baseline's at the same concurrency
    by_concurrency: list[dict[str, Any]] = field(default_factory=list)
    wins_at: list[int] = field(default_factory=list)
    speedup_low: float | None = None
    speedup_high: float | None = None
    confirmed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def method_name(row: Any) -> str:
    if row.method == "draft" and row.draft not in (None, "builtin"):
        return f"draft:{row.draft}"
    return row.method


def method_verdicts(rows: Sequence[Any], method_names: Iterable[str]) -> list[MethodVerdict]:
    """One verdict per method name (``draft:<label>`` for drafts other than the built-in): from the
    confirmed rows where the method reached the confirmation, else from its screening trials."""
    confirmed = [row for row in deciding_rows(rows) if confirmation_run(row) is not None and reliable(row)]
    screened = screening_rows(rows)
    base = baselines(rows)
    recommended_at = {b.concurrency: method_name(b) for b in per_concurrency(rows, sorted(base), NO_SLO) if b.method}
    verdicts = []
    for name in method_names:
        mine = [row for row in confirmed if method_name(row) == name] or [row for row in screened if method_name(row) == name]
        by_level = []
        for concurrency, best in best_by_concurrency(mine).items():
            speedup = speedup_estimate(best)
            by_level.append({
                "concurrency": concurrency, "depth": best.depth, "tokens_per_s": best.tokens_per_s,
                "speedup": speedup.value if speedup else None, "speedup_low": speedup.low if speedup else None,
                "speedup_high": speedup.high if speedup else None, "acceptance_rate": best.acceptance_rate,
                "acceptance_length": best.acceptance_length, "repetitions": getattr(best, "repetitions", 1),
            })
        with_speedup = [row for row in mine if speedup_estimate(row) is not None]
        top = (max(with_speedup, key=lambda row: (speedup_estimate(row).value, row.tokens_per_s)) if with_speedup
               else max(mine, key=lambda row: row.tokens_per_s, default=None))
        speedup = speedup_estimate(top) if top is not None else None
        baseline = base.get(top.concurrency) if top is not None else None
        overhead = None
        if top is not None and baseline is not None and None not in (top.peak_memory_bytes, baseline.peak_memory_bytes):
            overhead = top.peak_memory_bytes - baseline.peak_memory_bytes
        verdicts.append(MethodVerdict(
            name=name, method=name.split(":")[0], draft=mine[0].draft if mine else None,
            trials=sum(1 for row in rows if method_name(row) == name and confirmation_run(row) is None),
            best_label=row_label(top) if top else None, best_concurrency=top.concurrency if top else None,
            best_depth=top.depth if top else None, tokens_per_s=top.tokens_per_s if top else None,
            speedup=speedup.value if speedup else None, acceptance_rate=top.acceptance_rate if top else None,
            acceptance_length=top.acceptance_length if top else None, memory_overhead_bytes=overhead,
            by_concurrency=by_level, wins_at=sorted(b for b, winner in recommended_at.items() if winner == name),
            speedup_low=speedup.low if speedup else None, speedup_high=speedup.high if speedup else None,
            confirmed=top is not None and confirmation_run(top) is not None,
        ))
    return verdicts


def row_label(row: Any) -> str:
    """A row's configuration and concurrency in words (its stored label where it has one)."""
    label = getattr(row, "label", None)
    return label if isinstance(label, str) else f"{config_label(row)} c{row.concurrency}"


class _NoSlo:
    """No latency limits (the verdict compares methods, not deployments)."""

    @staticmethod
    def violation(_row: Any) -> float:
        return 0.0

    @staticmethod
    def is_met(_row: Any) -> bool:
        return True


NO_SLO = _NoSlo()


Figures = TypeVar("Figures")


def pareto_front(trials: Iterable[Figures]) -> list[Figures]:
    """The trials no other trial beats on both throughput (higher) and TPOT p50 (lower), among those
    that measured both, by ascending TPOT (and so ascending throughput)."""
    points = sorted(
        (t for t in trials if t.tokens_per_s is not None and t.tpot_ms_p50 is not None),
        key=lambda t: (t.tpot_ms_p50, -t.tokens_per_s),
    )
    front: list[Figures] = []
    for trial in points:  # ascending TPOT: keep each trial that raises the best throughput so far
        if not front or trial.tokens_per_s > front[-1].tokens_per_s:
            front.append(trial)
    return front
