"""The measurement protocol every engine's figures go through: warm-up, repeated paired rounds,
plausibility checks, a stopping rule, and racing.

Given an :class:`~autotune.engines.base.Engine` (embedded, TensorRT-LLM, or any later one: only
``load`` and ``measure`` are used), some configurations and a concurrency:

1. **Warm-up** (excluded from every figure): each configuration decodes one batch of the
   workload's first requests once (GuideLLM drops its warm-up; Perf Analyzer discards the first
   window).
2. **Rounds.** Each round measures every active configuration once over the workload's
   steady-state stream (:mod:`autotune.analysis.steady`: C requests kept in flight, figures over the
   window between ramp-up and drain), the baseline (no speculation at the same concurrency) included, in alternating order (A B C, then
   C B A: a linear drift of the machine cancels out of the pairs). A speedup is the geometric mean
   of the per-round ratios with its paired interval
   (:func:`~autotune.analysis.intervals.paired_ratio_interval`), never a ratio to a baseline from
   another moment.
3. **Faults.** A round is measured again, not kept, when one of its passes was disturbed (other
   processes kept part of the machine busy, see :mod:`autotune.engines.noise`) or a ratio is above
   what its acceptance allows (:mod:`autotune.analysis.plausibility`). After ``max_repetitions``
   discarded rounds, disturbed rounds are kept and the result is marked noisy (a machine that is
   never quiet still gets an answer, labelled as such); implausible rounds are never kept.
4. **Stopping.** After ``min_repetitions`` kept rounds, stop when every active configuration's
   tokens/s interval (and speedup interval) has a relative half-width within ``precision``
   (AIPerf's multi-run confidence; vLLM's sweep defaults to 3 runs), or when ``max_repetitions``
   rounds or ``max_seconds`` (checked once ``min_repetitions`` are kept) are reached: the result
   then says which cap it hit. ``budget_s`` (the tuner's study-wide ``--timeout``, what is left of
   it) is a hard cap: no new round starts after it, however few were kept, discarded rounds
   included (capped ``budget``; with no kept round at all, the run fails with EngineFault).
   ``unresolved_seconds`` gives an undecided race more time: when the time cap comes while the
   leader is speculative, its paired speedup over the baseline lies past the practical margin
   (:data:`~autotune.analysis.decision.PRACTICAL_MARGIN`) and its interval still reaches 1, the
   decision would deploy none on a wide interval, not on a measured tie (the chat benchmark's
   seed 5: ngram@1 at 1.14x [0.90, 1.45] over three rounds, 1.14x in the paired re-check). Rounds
   then go on for up to that many seconds more, until the interval clears 1 or the leader changes;
   the repetitions cap and ``budget_s`` still hold.
5. **Racing** (optional, used by the tuner's confirmation phase): after ``min_repetitions``, a
   configuration whose paired ratio to the current leader is below 1 at 95 % is dropped; its
   figures so far are kept and marked ``dropped``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from autotune.analysis.decision import PRACTICAL_MARGIN
from autotune.analysis.intervals import Estimate, mean_interval, paired_by_round, paired_ratio_interval
from autotune.analysis.plausibility import implausible_speedup
from autotune.analysis.steady import request_stream
from autotune.engines import noise
from autotune.engines.base import Engine, EngineConfig, Measurement, RunShape
from autotune.errors import ConfigurationError, EngineError
from autotune.workload import Workload

BASELINE = EngineConfig("none")
DEFAULT_PRECISION = 0.05
DEFAULT_MIN_REPETITIONS = 3
DEFAULT_MAX_REPETITIONS = 10
DEFAULT_MAX_SECONDS = 180.0
# The tuner's confirmation phase, per concurrency: at most 8 rounds, and no new round after 35 s once
# 3 are kept, so a default study's confirmation stays within ~3 min on our CPU (4 concurrency levels).
DEFAULT_CONFIRM_REPETITIONS = 8
DEFAULT_CONFIRM_SECONDS = 35.0
# Figures that get an interval (each pass reports them; the speedup is added for paired configurations).
ESTIMATED = (
    "tokens_per_s", "requests_per_s", "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99",
    "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99", "acceptance_rate", "acceptance_length", "occupancy",
)
CAPS = ("repetitions", "time", "budget")


@dataclass(frozen=True)
class ProtocolOptions:
    """How hard to measure: ``precision`` is the target relative half-width of the 95 % intervals
    (0.05 = ±5 %); at least ``min_repetitions`` and at most ``max_repetitions`` kept rounds, and no
    new round after ``max_seconds``; ``race`` drops configurations clearly slower than the leader;
    ``budget_s``: no new round after this many seconds, whatever was kept (None: no such cap);
    ``measure_under_load``: keep a round other processes disturbed at once (a load that persists is
    the condition to measure under; the rounds stay paired with the baseline), instead of only after
    ``max_repetitions`` discarded rounds; ``unresolved_seconds``: how much longer than ``max_seconds``
    rounds go on while the leader's speedup over the baseline is undecided (module doc, 4)."""

    precision: float = DEFAULT_PRECISION
    min_repetitions: int = DEFAULT_MIN_REPETITIONS
    max_repetitions: int = DEFAULT_MAX_REPETITIONS
    max_seconds: float = DEFAULT_MAX_SECONDS
    race: bool = False
    budget_s: float | None = None
    measure_under_load: bool = False
    unresolved_seconds: float = 0.0

    def validate(self) -> None:
        """ConfigurationError naming the first option out of range."""
        if not _number(self.precision) or not 0 < self.precision < 1:
            raise ConfigurationError(f"precision must be a fraction in (0, 1), e.g. 0.05 for ±5 %, got {self.precision!r}")
        for name in ("min_repetitions", "max_repetitions"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigurationError(f"{name.replace('_', ' ')} must be an integer >= 1, got {value!r}")
        if self.max_repetitions < self.min_repetitions:
            raise ConfigurationError(
                f"max repetitions ({self.max_repetitions}) is below min repetitions ({self.min_repetitions})"
            )
        if not _number(self.max_seconds) or not math.isfinite(self.max_seconds) or self.max_seconds <= 0:
            raise ConfigurationError(f"max seconds must be a number > 0, got {self.max_seconds!r}")
        if not _number(self.unresolved_seconds) or not math.isfinite(self.unresolved_seconds) or self.unresolved_seconds < 0:
            raise ConfigurationError(f"unresolved seconds must be a number >= 0, got {self.unresolved_seconds!r}")
        if self.budget_s is not None and (not _number(self.budget_s) or self.budget_s < 0):
            raise ConfigurationError(f"budget seconds must be a number >= 0, got {self.budget_s!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"precision": self.precision, "min_repetitions": self.min_repetitions,
                "max_repetitions": self.max_repetitions, "max_seconds": self.max_seconds, "race": self.race,
                "budget_s": self.budget_s, "measure_under_load": self.measure_under_load,
                "unresolved_seconds": self.unresolved_seconds}


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class RepeatedMeasurement:
    """One configuration's figures over the kept rounds.

    ``measurement``: the first kept pass with its timing figures replaced by their means over the
    kept passes (so code that reads a Measurement reads central values); ``estimates``: the
    figures of ESTIMATED with intervals, plus ``speedup`` (paired, over the baseline) for a
    speculative configuration measured with one; ``samples``: tokens/s per kept round, and
    ``rounds`` their round numbers (aligned, so two configurations compare pass for pass);
    ``noise``: :func:`autotune.engines.noise.summarize` of its passes.
    """

    config: EngineConfig
    concurrency: int
    measurement: Measurement
    estimates: dict[str, Estimate]
    samples: list[float]
    rounds: list[int]
    noise: dict[str, Any]
    capped: str | None = None
    dropped: bool = False
    noisy: bool = False

    @property
    def repetitions(self) -> int:
        return len(self.samples)

    @property
    def tokens_per_s(self) -> Estimate:
        return self.estimates["tokens_per_s"]

    @property
    def speedup(self) -> Estimate | None:
        return self.estimates.get("speedup")

    def to_dict(self, include_outputs: bool = False) -> dict[str, Any]:
        return {
            # off_state crosses the worker boundary too: without it a K = 0 point comes back as a
            # depth-0 config that matches no candidate and would be stored as a second baseline.
            "config": {"method": self.config.method, "depth": self.config.depth, "draft": self.config.draft,
                       "off_state": self.config.off_state},
            "concurrency": self.concurrency,
            "measurement": self.measurement.to_dict(include_outputs),
            "estimates": {name: estimate.to_dict() for name, estimate in self.estimates.items()},
            "repetitions": self.repetitions,
            "samples": list(self.samples),
            "rounds": list(self.rounds),
            "noise": dict(self.noise),
            "capped": self.capped,
            "dropped": self.dropped,
            "noisy": self.noisy,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RepeatedMeasurement:
        return cls(
            config=EngineConfig(**data["config"]), concurrency=data["concurrency"],
            measurement=Measurement.from_dict(data["measurement"]),
            estimates={name: Estimate.from_dict(value) for name, value in data["estimates"].items()},
            samples=list(data["samples"]), rounds=list(data["rounds"]), noise=dict(data["noise"]),
            capped=data.get("capped"), dropped=bool(data.get("dropped")), noisy=bool(data.get("noisy")),
        )


@dataclass
class ProtocolResult:
    """Every configuration of one protocol run (the baseline first, when measured)."""

    concurrency: int
    measurements: list[RepeatedMeasurement]
    rounds_kept: int
    rounds_discarded: int
    elapsed_s: float
    capped: str | None
    faults: list[str] = field(default_factory=list)
    options: ProtocolOptions = field(default_factory=ProtocolOptions)

    def of(self, config: EngineConfig) -> RepeatedMeasurement:
        return next(m for m in self.measurements if m.config == config)

    @property
    def baseline(self) -> RepeatedMeasurement | None:
        return next((m for m in self.measurements if m.config == BASELINE), None)

    def compare(self, a: EngineConfig, b: EngineConfig) -> Estimate:
        """Paired tokens/s ratio a / b over the rounds both were measured in."""
        return compare_samples(self.of(a), self.of(b))

    def to_dict(self, include_outputs: bool = False) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "measurements": [m.to_dict(include_outputs) for m in self.measurements],
            "rounds_kept": self.rounds_kept,
            "rounds_discarded": self.rounds_discarded,
            "elapsed_s": self.elapsed_s,
            "capped": self.capped,
            "faults": list(self.faults),
            "options": self.options.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProtocolResult:
        return cls(
            concurrency=data["concurrency"],
            measurements=[RepeatedMeasurement.from_dict(m) for m in data["measurements"]],
            rounds_kept=data["rounds_kept"], rounds_discarded=data["rounds_discarded"], elapsed_s=data["elapsed_s"],
            capped=data.get("capped"), faults=list(data.get("faults", [])),
            options=ProtocolOptions(**data.get("options", {})),
        )


def compare_samples(a: RepeatedMeasurement, b: RepeatedMeasurement) -> Estimate:
    """Paired ratio of a's tokens/s over b's, over the rounds both kept."""
    numerators, denominators = paired_by_round(a.rounds, a.samples, b.rounds, b.samples)
    if not numerators:
        raise ValueError(f"{a.config.label()} and {b.config.label()} share no round")
    return paired_ratio_interval(numerators, denominators)


@dataclass
class Pass:
    """One timed pass over the workload and what else the machine did meanwhile."""

    measurement: Measurement
    load: noise.BackgroundLoad


@dataclass
class _Rounds:
    """The protocol's round count so far: kept and discarded rounds, and why each was discarded."""

    kept: int = 0
    discarded: int = 0
    faults: list[str] = field(default_factory=list)
    extended: bool = False  # the time cap was passed for an undecided leader (said once)

    @property
    def number(self) -> int:
        return self.kept + self.discarded


@dataclass
class _Track:
    """The kept passes of one configuration while the protocol runs."""

    config: EngineConfig
    passes: list[Pass] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    dropped: bool = False

    @property
    def samples(self) -> list[float]:
        return [p.measurement.tokens_per_s for p in self.passes]


def measure_repeatedly(
    engine: Engine,
    configs: Sequence[EngineConfig],
    shape: RunShape,
    options: ProtocolOptions | None = None,
    baseline: bool = True,
    progress: Callable[[str], None] | None = None,
    notice: Callable[[str], None] | None = None,
) -> ProtocolResult:
    """Run the protocol (see the module doc) for ``configs``, every pass driven as ``shape`` says;
    with ``baseline`` the no-speculation configuration is measured in the same rounds and every
    speculative configuration gets a paired speedup. ``progress`` gets a line per pass; a discarded
    round's line goes to ``notice`` when given (a caller that shows no passes still says why a run
    takes longer), else to ``progress``."""
    options = options or ProtocolOptions()
    options.validate()
    ordered = list(dict.fromkeys(([BASELINE] if baseline else []) + list(configs)))
    if not ordered:
        raise ConfigurationError("nothing to measure: give at least one configuration")
    report = progress or (lambda _text: None)
    started = time.monotonic()
    tracks = [_Track(config) for config in ordered]
    _warm_up(engine, ordered, shape)
    rounds = _Rounds()
    capped: str | None = None
    stop = False
    while not stop:
        round_number = rounds.number
        active = [t for t in tracks if not t.dropped]
        order = active if round_number % 2 == 0 else active[::-1]
        passes = {}
        for track in order:
            report(f"round {round_number + 1}: {track.config.label()} at concurrency {shape.concurrency}")
            passes[track.config] = _measure_pass(engine, track.config, shape)
        allow_disturbed = options.measure_under_load or rounds.discarded >= options.max_repetitions
        fault = _round_fault(passes, baseline, allow_disturbed=allow_disturbed)
        if fault is None:
            rounds.kept += 1
            for track in active:
                track.passes.append(passes[track.config])
                track.rounds.append(round_number)
        else:
            rounds.discarded += 1
            rounds.faults.append(f"round {round_number + 1}: {fault}")
            (notice or report)(f"round {round_number + 1} at concurrency {shape.concurrency}: {fault}: re-measuring")
        stop, capped = _stopping(tracks, baseline, rounds, options, time.monotonic() - started, shape.concurrency,
                                 notice or report)
    base_track = tracks[0] if baseline else None
    measurements = [_summarize(t, base_track, shape.concurrency, capped if not t.dropped else None) for t in tracks]
    return ProtocolResult(shape.concurrency, measurements, rounds.kept, rounds.discarded, time.monotonic() - started,
                          capped, rounds.faults, options)


def _stopping(tracks: list[_Track], baseline: bool, rounds: _Rounds, options: ProtocolOptions, elapsed: float,
              concurrency: int, say: Callable[[str], None]) -> tuple[bool, str | None]:
    """After a round: whether to stop, and the cap that stopped it (None when every interval is
    precise enough, or when going on). Races the tracks once the minimum rounds are kept; past the
    time cap, goes on for an undecided leader (module doc, 4), saying so once; raises EngineFault
    when the budget ran out before any round was kept, or when rounds keep failing."""
    if rounds.kept >= options.min_repetitions:
        if options.race:
            _race(tracks)
        if all(_precise(t, tracks[0] if baseline else None, options.precision) for t in tracks if not t.dropped):
            return True, None
    if rounds.kept >= options.max_repetitions:
        return True, "repetitions"
    if elapsed >= options.max_seconds and rounds.kept >= options.min_repetitions:
        undecided = (_undecided_leader(tracks) if baseline and elapsed < options.max_seconds + options.unresolved_seconds
                     else None)
        if undecided is None:
            return True, "time"
        if not rounds.extended:
            rounds.extended = True
            say(f"at concurrency {concurrency}, {undecided}: measuring up to {options.unresolved_seconds:.0f} s more "
                f"to decide")
    if options.budget_s is not None and elapsed >= options.budget_s:
        if not rounds.kept:
            raise EngineFault(f"the time budget ran out before a round could be kept at concurrency {concurrency}"
                              + (f" (last: {rounds.faults[-1]})" if rounds.faults else ""))
        return True, "budget"
    if rounds.discarded >= 2 * options.max_repetitions:  # implausible again and again: give up, say why
        raise EngineFault(f"no plausible round in {rounds.discarded} tries at concurrency {concurrency}: "
                          f"{rounds.faults[-1]}")
    return False, None


class EngineFault(EngineError):
    """The protocol could not get a plausible measurement (the machine kept disturbing it)."""


def _warm_up(engine: Engine, configs: list[EngineConfig], shape: RunShape) -> None:
    """One batch of the first requests per configuration, not timed (loads models, fills caches).
    In reverse order, so that the first round starts with the configuration loaded last. An engine
    that holds one configuration at a time (``holds_one_configuration``: TensorRT-LLM, vLLM on a
    GPU) would shut every other warmed engine down before measuring it, so only that one is warmed:
    such an engine warms each build up itself, as it must for the rebuilds of later rounds anyway."""
    first = request_stream(shape.workload, shape.concurrency).head(shape.concurrency)
    warmed = configs[:1] if getattr(engine, "holds_one_configuration", False) else configs
    for config in reversed(warmed):
        engine.load(config)
        engine.measure(first, shape.concurrency, shape.temperature, shape.seed)


def _measure_pass(engine: Engine, config: EngineConfig, shape: RunShape) -> Pass:
    engine.load(config)
    return measure_pass(engine, shape.workload, shape.concurrency, shape.temperature, shape.seed)


def measure_pass(engine: Engine, workload: Workload, concurrency: int, temperature: float | None = None,
                 seed: int = 0) -> Pass:
    """One pass of the loaded configuration over the workload's steady-state stream at concurrency
    ``concurrency`` (:mod:`autotune.analysis.steady`), with the background load around it (the
    screening trials get the same disturbance check as the protocol's rounds)."""
    stream = request_stream(workload, concurrency)
    before = noise.snapshot()
    measurement = engine.measure(stream, concurrency, temperature, seed)
    return Pass(measurement, noise.between(before, noise.snapshot()))


def _round_fault(passes: dict[EngineConfig, Pass], baseline: bool, allow_disturbed: bool) -> str | None:
    """Why this round cannot be kept, or None."""
    if not allow_disturbed:
        for config, one in passes.items():
            if one.load.disturbed:
                return f"{config.label()} pass disturbed ({one.load.describe()})"
    if baseline:
        base = passes[BASELINE].measurement.tokens_per_s
        for config, one in passes.items():
            if config == BASELINE:
                continue
            reason = implausible_speedup(one.measurement.tokens_per_s / base, one.measurement.acceptance_length,
                                         config.depth)
            if reason is not None:
                return f"{config.label()}: {reason}"
    return None


def _race(tracks: list[_Track]) -> None:
    """Drop the configurations whose paired ratio to the leader is below 1 at 95 %; the baseline
    (the first track when measured) and the leader stay."""
    active = [t for t in tracks if not t.dropped]
    leader = _leader(tracks)
    for track in active:
        if track is leader or track.config == BASELINE:
            continue
        ratio = paired_ratio_interval(*_aligned(track, leader))
        if ratio.high is not None and ratio.high < 1:
            track.dropped = True


def _leader(tracks: list[_Track]) -> _Track:
    """The active track with the most mean tokens/s (what racing and the time cap measure against)."""
    return max((t for t in tracks if not t.dropped), key=lambda t: mean_interval(t.samples).value)


def _undecided_leader(tracks: list[_Track]) -> str | None:
    """"ngram@1 leads none by 1.14x [0.90, 1.45]" when the leader (most mean tokens/s) is
    speculative, its paired speedup over the baseline (the first track) lies past the practical margin
    and its interval reaches 1; None otherwise."""
    base, leader = tracks[0], _leader(tracks)
    if leader is base:
        return None
    speedup = paired_ratio_interval(*_aligned(leader, base))
    if speedup.low is None or speedup.low > 1 or speedup.value < 1 / (1 - PRACTICAL_MARGIN):
        return None
    return (f"{leader.config.label()} leads {base.config.label()} by {speedup.value:.2f}x "
            f"[{speedup.low:.2f}, {speedup.high:.2f}]")


def _aligned(a: _Track, b: _Track) -> tuple[list[float], list[float]]:
    return paired_by_round(a.rounds, a.samples, b.rounds, b.samples)


def _precise(track: _Track, base: _Track | None, precision: float) -> bool:
    width = mean_interval(track.samples).relative_half_width
    if width is None or width > precision:
        return False
    if base is None or track is base:
        return True
    speedup = paired_ratio_interval(*_aligned(track, base)).relative_half_width
    return speedup is not None and speedup <= precision


def _summarize(track: _Track, base: _Track | None, concurrency: int, capped: str | None) -> RepeatedMeasurement:
    measurements = [p.measurement for p in track.passes]
    estimates: dict[str, Estimate] = {}
    for name in ESTIMATED:
        values = [getattr(m, name) for m in measurements]
        if values and all(v is not None for v in values):
            estimates[name] = mean_interval(values)
    if base is not None and track is not base:
        estimates["speedup"] = paired_ratio_interval(*_aligned(track, base))
    central = {name: estimate.value for name, estimate in estimates.items() if name != "speedup"}
    wall = mean_interval([m.wall_time_s for m in measurements]).value
    measurement = replace(measurements[0], wall_time_s=wall, **central)
    loads = [p.load for p in track.passes]
    return RepeatedMeasurement(
        config=track.config, concurrency=concurrency, measurement=measurement, estimates=estimates,
        samples=track.samples, rounds=list(track.rounds), noise=noise.summarize(loads), capped=capped,
        dropped=track.dropped, noisy=any(load.disturbed for load in loads),
    )
