"""The measurement protocol on a fake engine: warm-up, alternating rounds with the baseline,
stopping rule and caps, discarded rounds, racing, and the result's (de)serialisation.

The engine's tokens/s come from a table times seeded multiplicative noise, and the machine's
background load is whatever the test says (quiet by default), so every run is deterministic.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable

import pytest

from autotune.engines import noise, protocol
from autotune.engines.base import EngineConfig, Measurement
from autotune.engines.protocol import (
    BASELINE, EngineFault, ProtocolOptions, ProtocolResult, RepeatedMeasurement, compare_samples, measure_repeatedly,
)
from autotune.analysis.steady import request_stream
from autotune.engines.base import RunShape
from autotune.errors import ConfigurationError, EngineError
from autotune.workload import Request, Workload

DRAFT = EngineConfig("draft", 4)
NGRAM = EngineConfig("ngram", 2)
MTP = EngineConfig("mtp", 3)
WORKLOAD = Workload("w", [Request("a", 8), Request("b", 8), Request("c", 8), Request("d", 8)])
QUIET = noise.BackgroundLoad(other_cpu_cores=0.0, steal_fraction=0.0, load_avg_1m=0.1, cpu_count=2)
BUSY = noise.BackgroundLoad(other_cpu_cores=1.5, steal_fraction=0.0, load_avg_1m=2.0, cpu_count=2)


def measurement(config: EngineConfig, workload: Workload, concurrency: int, tokens_per_s: float,
                acceptance_length: float) -> Measurement:
    tokens = sum(r.max_tokens for r in workload.requests)
    wall = tokens / tokens_per_s
    speculative = config.method != "none"
    drafted = 10 * config.depth if speculative else 0
    accepted = drafted // 2
    return Measurement(
        method=config.method, depth=config.depth, concurrency=concurrency, draft=config.draft_model, temperature=None,
        seed=0, device="cpu", workload_name=workload.label, workload_sha256=workload.sha256,
        n_requests=len(workload.requests), output_tokens=tokens, wall_time_s=wall, tokens_per_s=tokens_per_s,
        requests_per_s=len(workload.requests) / wall, ttft_ms_p50=1.0, ttft_ms_p90=2.0, ttft_ms_p99=3.0,
        tpot_ms_p50=1000 / tokens_per_s, tpot_ms_p90=1100 / tokens_per_s, tpot_ms_p99=1200 / tokens_per_s,
        drafted_tokens=drafted, accepted_tokens=accepted, acceptance_rate=accepted / drafted if drafted else None,
        acceptance_alpha=0.5 if speculative else None, acceptance_length=acceptance_length,
        acceptance_by_position=[0.5] * config.depth, target_passes=10, sequence_steps=10, propose_time_s=0.0,
        verify_time_s=0.0, prefill_time_s=0.0, peak_memory_bytes=1, memory_kind="cpu_weights_and_caches",
        outputs=[[1] * r.max_tokens for r in workload.requests],
    )


class TableEngine:
    """tokens/s = ``speeds[config]`` x exp(gauss(0, ``sigma``)) (seeded), times ``factors[(config, k)]``
    for the k-th timed pass of a configuration. Warm-up passes (fewer requests than the workload)
    report a tokens/s no kept figure could have. Records every call in ``calls``."""

    name = "table"

    def __init__(self, speeds: dict[EngineConfig, float], sigma: float = 0.01, seed: int = 0,
                 acceptance: dict[EngineConfig, float] | None = None,
                 factors: dict[tuple[EngineConfig, int], float] | None = None) -> None:
        self.speeds = speeds
        self.sigma = sigma
        self.rng = random.Random(seed)
        self.acceptance = acceptance or {}
        self.factors = factors or {}
        self.loads = 0
        self.config: EngineConfig | None = None
        self.calls: list[tuple[str, EngineConfig, int]] = []  # ("warmup" | "timed", config, concurrency)
        self.timed: dict[EngineConfig, int] = {}

    def load(self, config: EngineConfig) -> None:
        if config != self.config:
            self.loads += 1
        self.config = config

    def measure(self, workload: Workload, concurrency: int, temperature=None, seed: int = 0) -> Measurement:
        config = self.config
        assert config is not None
        length = self.acceptance.get(config, 1.0 if config.method == "none" else config.depth / 2 + 1)
        if len(workload.requests) < len(WORKLOAD.requests):
            self.calls.append(("warmup", config, concurrency))
            return measurement(config, workload, concurrency, 1e-3, length)
        k = self.timed.get(config, 0)
        self.timed[config] = k + 1
        self.calls.append(("timed", config, concurrency))
        speed = self.speeds[config] * math.exp(self.rng.gauss(0, self.sigma)) * self.factors.get((config, k), 1.0)
        return measurement(config, workload, concurrency, speed, length)

    def close(self) -> None:
        pass

    def timed_order(self) -> list[EngineConfig]:
        return [config for kind, config, _ in self.calls if kind == "timed"]


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[int], noise.BackgroundLoad]], None]:
    """A quiet machine by default; ``machine(schedule)`` makes the k-th timed pass see ``schedule(k)``."""
    schedule: list[Callable[[int], noise.BackgroundLoad]] = [lambda _k: QUIET]
    passes = [0]

    def fake_between(_before, _after) -> noise.BackgroundLoad:
        passes[0] += 1
        return schedule[0](passes[0] - 1)

    monkeypatch.setattr(noise, "snapshot", lambda: noise.Snapshot(0.0, None, None, None, None))
    monkeypatch.setattr(noise, "between", fake_between)

    def set_schedule(function: Callable[[int], noise.BackgroundLoad]) -> None:
        schedule[0] = function

    return set_schedule


def run(engine, configs=(DRAFT,), **options) -> ProtocolResult:
    concurrency = options.pop("concurrency", 1)
    baseline = options.pop("baseline", True)
    return measure_repeatedly(engine, list(configs), RunShape(WORKLOAD, concurrency), options=ProtocolOptions(**options),
                              baseline=baseline)


SPEEDS = {BASELINE: 100.0, DRAFT: 150.0, NGRAM: 105.0, MTP: 180.0}


# --- warm-up and rounds ----------------------------------------------------------------------------


def test_warm_up_runs_first_and_is_not_in_the_samples(machine):
    engine = TableEngine(SPEEDS)
    result = run(engine, min_repetitions=3, max_repetitions=3)
    kinds = [kind for kind, _, _ in engine.calls]
    assert kinds[:2] == ["warmup", "warmup"] and "warmup" not in kinds[2:]
    # In reverse order: the first round starts with the configuration warmed last (no switch for an
    # engine that holds one configuration at a time).
    assert [config for kind, config, _ in engine.calls if kind == "warmup"] == [DRAFT, BASELINE]
    assert engine.timed_order()[0] == BASELINE
    for repeated in result.measurements:
        assert repeated.repetitions == 3 and all(s > 50 for s in repeated.samples)  # no 0.001 tokens/s pass
        assert repeated.noise["passes"] == 3
    assert len(engine.timed_order()) == 6


def test_an_engine_holding_one_configuration_warms_up_only_the_first_measured(machine):
    """Its other warmed engines would be shut down before they are measured: builds for nothing."""
    engine = TableEngine(SPEEDS)
    engine.holds_one_configuration = True
    run(engine, min_repetitions=3, max_repetitions=3)
    assert [config for kind, config, _ in engine.calls if kind == "warmup"] == [BASELINE]
    assert engine.timed_order()[0] == BASELINE


def test_warm_up_decodes_one_batch_of_the_first_requests(machine):
    engine = TableEngine(SPEEDS)
    seen: list[Workload] = []
    measure = engine.measure

    def recording(workload, concurrency, temperature=None, seed=0):
        seen.append(workload)
        return measure(workload, concurrency, temperature, seed)

    engine.measure = recording
    run(engine, min_repetitions=3, max_repetitions=3, concurrency=2)
    assert seen[0].requests == WORKLOAD.requests[:2] and seen[1].requests == WORKLOAD.requests[:2]
    assert all(w == request_stream(WORKLOAD, 2) for w in seen[2:])  # every timed pass: the steady-state stream


def test_rounds_alternate_their_order_and_include_the_baseline(machine):
    engine = TableEngine(SPEEDS)
    result = run(engine, [DRAFT, NGRAM], min_repetitions=4, max_repetitions=4)
    order = engine.timed_order()
    assert order == [BASELINE, DRAFT, NGRAM, NGRAM, DRAFT, BASELINE] * 2
    assert [m.config for m in result.measurements] == [BASELINE, DRAFT, NGRAM]
    assert result.baseline is result.measurements[0]
    assert all(m.rounds == [0, 1, 2, 3] for m in result.measurements)


def test_at_least_min_repetitions_even_when_precise_at_once(machine):
    engine = TableEngine(SPEEDS, sigma=0.0)
    result = run(engine, min_repetitions=5, max_repetitions=10)
    assert result.rounds_kept == 5 and result.capped is None
    assert result.of(DRAFT).repetitions == 5


def test_without_baseline_there_is_no_speedup(machine):
    engine = TableEngine(SPEEDS)
    result = run(engine, [DRAFT, NGRAM], baseline=False, min_repetitions=3, max_repetitions=3)
    assert BASELINE not in engine.timed_order() and result.baseline is None
    assert [m.config for m in result.measurements] == [DRAFT, NGRAM]
    assert result.of(DRAFT).speedup is None
    assert result.compare(DRAFT, NGRAM).value == pytest.approx(150 / 105, rel=0.03)


def test_the_baseline_given_as_a_configuration_is_measured_once_per_round(machine):
    engine = TableEngine(SPEEDS)
    result = run(engine, [BASELINE, DRAFT], min_repetitions=3, max_repetitions=3)
    assert [m.config for m in result.measurements] == [BASELINE, DRAFT]
    assert engine.timed_order().count(BASELINE) == 3


def test_nothing_to_measure(machine):
    with pytest.raises(ConfigurationError, match="nothing to measure"):
        run(TableEngine(SPEEDS), [], baseline=False)


# --- stopping --------------------------------------------------------------------------------------


def test_low_noise_stops_at_min_repetitions(machine):
    engine = TableEngine(SPEEDS, sigma=0.001)
    result = run(engine, min_repetitions=3, max_repetitions=10, precision=0.05)
    assert result.rounds_kept == 3 and result.capped is None and result.rounds_discarded == 0
    assert all(m.capped is None for m in result.measurements)
    assert result.of(DRAFT).tokens_per_s.relative_half_width <= 0.05
    assert result.of(DRAFT).speedup.relative_half_width <= 0.05


def test_precision_reached_after_more_rounds(machine):
    engine = TableEngine(SPEEDS, sigma=0.03, seed=3)
    result = run(engine, min_repetitions=3, max_repetitions=20, precision=0.03)
    assert 3 < result.rounds_kept < 20 and result.capped is None
    for repeated in result.measurements:
        assert repeated.tokens_per_s.relative_half_width <= 0.03
    assert result.of(DRAFT).speedup.relative_half_width <= 0.03


def test_high_noise_hits_the_repetitions_cap(machine):
    engine = TableEngine(SPEEDS, sigma=0.2, seed=1, acceptance={DRAFT: 4.0})
    result = run(engine, min_repetitions=3, max_repetitions=5, precision=0.01)
    assert result.capped == "repetitions" and result.rounds_kept == 5
    assert all(m.capped == "repetitions" and m.repetitions == 5 for m in result.measurements)


def test_time_cap_stops_after_min_repetitions(machine):
    engine = TableEngine(SPEEDS, sigma=0.2, seed=1, acceptance={DRAFT: 4.0})
    result = run(engine, min_repetitions=3, max_repetitions=10, precision=0.01, max_seconds=1e-9)
    assert result.capped == "time" and result.rounds_kept == 3
    assert result.of(DRAFT).capped == "time" and result.of(DRAFT).repetitions == 3


def test_time_cap_with_a_controlled_clock(machine, monkeypatch):
    """Each timed pass takes 10 s of the (fake) clock: with max_seconds 45, no round starts after 45 s."""
    engine = TableEngine(SPEEDS, sigma=0.2, seed=1, acceptance={DRAFT: 4.0})
    ten_second_passes(engine, monkeypatch)
    result = run(engine, min_repetitions=2, max_repetitions=10, precision=0.01, max_seconds=45.0)
    # warm-up 20 s, then 20 s a round: 40 s after round 1, 60 s after round 2 (>= 45, min 2 kept)
    assert result.capped == "time" and result.rounds_kept == 2
    assert result.elapsed_s == pytest.approx(60.0)


# Chat seed 5's confirmation at c8 (docs/benchmarks.md): ngram@1 against none over the three rounds it
# kept, 1.14x [0.90, 1.45], then the leader's true ratio (1.147) in every later round.
NGRAM1 = EngineConfig("ngram", 1)
CHAT = {BASELINE: 850.0, NGRAM1: 975.0}
CHAT_ROUNDS = {**{(BASELINE, k): v / 850.0 for k, v in enumerate((815.0, 868.0, 870.0))},
               **{(NGRAM1, k): v / 975.0 for k, v in enumerate((959.0, 889.0, 1073.0))}}


def ten_second_passes(engine: TableEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pass (warm-up included) takes 10 s of the protocol's (fake) clock."""
    clock = [0.0]
    monkeypatch.setattr(protocol.time, "monotonic", lambda: clock[0])
    measure = engine.measure

    def slow(workload, concurrency, temperature=None, seed=0):
        clock[0] += 10.0
        return measure(workload, concurrency, temperature, seed)

    engine.measure = slow


def chat_race(monkeypatch, speeds=CHAT, factors=CHAT_ROUNDS, sigma=0.0, **options) -> tuple[ProtocolResult, list[str]]:
    engine = TableEngine(speeds, sigma=sigma, seed=3, factors=factors, acceptance={NGRAM1: 1.6})
    ten_second_passes(engine, monkeypatch)
    said: list[str] = []
    result = measure_repeatedly(engine, [NGRAM1], RunShape(WORKLOAD, 2), notice=said.append,
                                options=ProtocolOptions(**{"min_repetitions": 3, "max_repetitions": 8, "precision": 0.03,
                                                           "max_seconds": 45.0, "race": True, **options}))
    return result, said


def test_at_the_time_cap_an_undecided_speculative_leader_gets_rounds_until_its_interval_clears_1(machine, monkeypatch):
    """Warm-up 20 s, 20 s a round: the cap (45 s) comes after round 3 (80 s) with ngram@1 at 1.14x
    [0.90, 1.45]; rounds go on (up to 100 s more) and stop at the cap once the interval clears 1: one
    more round, [1.01, 1.30]."""
    result, said = chat_race(monkeypatch, unresolved_seconds=100.0)
    speedup = result.of(NGRAM1).speedup
    assert result.rounds_kept == 4 and result.capped == "time"
    assert speedup.low > 1 and speedup.value == pytest.approx(1.14, abs=0.01)
    assert said == ["at concurrency 2, ngram@1 leads none by 1.14x [0.90, 1.45]: measuring up to 100 s more to decide"]


def test_without_extra_time_the_undecided_leader_stops_at_the_cap(machine, monkeypatch):
    result, said = chat_race(monkeypatch)
    speedup = result.of(NGRAM1).speedup
    assert result.rounds_kept == 3 and result.capped == "time" and said == []
    assert (round(speedup.low, 2), round(speedup.high, 2)) == (0.90, 1.45)


def test_the_extra_time_is_a_cap_too(machine, monkeypatch):
    """A fourth round as noisy as the first three (ngram@1 0.95x none): not decided by 45 + 40 s, so
    no round starts after 85 s."""
    noisy = {**CHAT_ROUNDS, (BASELINE, 3): 900.0 / 850.0, (NGRAM1, 3): 855.0 / 975.0}
    result, said = chat_race(monkeypatch, factors=noisy, unresolved_seconds=40.0)
    assert result.rounds_kept == 4 and result.capped == "time" and result.elapsed_s == pytest.approx(100.0)
    assert result.of(NGRAM1).speedup.low < 1 and len(said) == 1


@pytest.mark.parametrize("speeds", [{BASELINE: 850.0, NGRAM1: 867.0},    # 1.02x: within the practical margin
                                    {BASELINE: 975.0, NGRAM1: 850.0}],   # the baseline leads
                         ids=["within-the-margin", "baseline-leads"])
def test_no_extra_time_where_the_decision_would_not_change(machine, monkeypatch, speeds):
    result, said = chat_race(monkeypatch, speeds=speeds, factors={}, sigma=0.1, unresolved_seconds=100.0)
    assert result.rounds_kept == 3 and result.capped == "time" and said == []


# --- figures ---------------------------------------------------------------------------------------


def test_paired_speedup_is_close_to_the_table_ratio(machine):
    engine = TableEngine(SPEEDS, sigma=0.02, seed=11)
    result = run(engine, [DRAFT, MTP], min_repetitions=5, max_repetitions=5)
    for config in (DRAFT, MTP):
        speedup = result.of(config).speedup
        true = SPEEDS[config] / SPEEDS[BASELINE]
        assert speedup.n == 5 and speedup.low <= true <= speedup.high
        assert speedup.value == pytest.approx(true, rel=0.03)
        assert speedup.excludes(1.0)
    assert result.baseline.speedup is None


def test_estimates_and_central_measurement(machine):
    engine = TableEngine(SPEEDS, sigma=0.02, seed=5)
    result = run(engine, min_repetitions=4, max_repetitions=4)
    draft = result.of(DRAFT)
    assert draft.tokens_per_s.n == 4
    assert draft.tokens_per_s.value == pytest.approx(sum(draft.samples) / 4)
    assert draft.measurement.tokens_per_s == pytest.approx(draft.tokens_per_s.value)
    assert draft.tokens_per_s.low <= 150 <= draft.tokens_per_s.high
    assert {"tokens_per_s", "requests_per_s", "tpot_ms_p50", "acceptance_length", "acceptance_rate",
            "speedup"} <= set(draft.estimates)
    assert "acceptance_rate" not in result.baseline.estimates  # None for the baseline: no estimate
    assert draft.measurement.method == "draft" and draft.concurrency == 1


# --- faults ----------------------------------------------------------------------------------------


def test_a_round_with_a_disturbed_pass_is_measured_again(machine):
    machine(lambda k: BUSY if k == 3 else QUIET)  # the 4th timed pass: round 2 runs draft, then none
    engine = TableEngine(SPEEDS, sigma=0.001)
    result = run(engine, min_repetitions=3, max_repetitions=10)
    assert result.rounds_discarded == 1 and result.rounds_kept == 3
    assert len(result.faults) == 1
    assert result.faults[0].startswith("round 2: none pass disturbed") and "1.50 of 2 cores" in result.faults[0]
    assert result.of(DRAFT).rounds == [0, 2, 3] and result.baseline.rounds == [0, 2, 3]
    assert not any(m.noisy for m in result.measurements)
    assert all(m.noise["disturbed_passes"] == 0 for m in result.measurements)


def test_steal_disturbs_a_round_too(machine):
    stolen = noise.BackgroundLoad(other_cpu_cores=None, steal_fraction=0.3, load_avg_1m=None, cpu_count=2)
    machine(lambda k: stolen if k == 0 else QUIET)
    result = run(TableEngine(SPEEDS, sigma=0.001), min_repetitions=3, max_repetitions=10)
    assert result.rounds_discarded == 1 and "CPU steal" in result.faults[0]


def test_an_implausible_round_is_measured_again(machine):
    """One baseline pass 10x slower: the round's speedup (~15x) is above what acceptance 2.0 allows."""
    engine = TableEngine(SPEEDS, sigma=0.001, acceptance={DRAFT: 2.0}, factors={(BASELINE, 1): 0.1})
    result = run(engine, min_repetitions=3, max_repetitions=10)
    assert result.rounds_discarded == 1 and result.rounds_kept == 3
    assert result.faults[0].startswith("round 2: draft@4: speedup") and "2.40x" in result.faults[0]
    assert min(result.baseline.samples) > 90  # the 10 tokens/s pass is not kept
    assert result.of(DRAFT).speedup.value == pytest.approx(1.5, rel=0.01)


def test_after_too_many_disturbed_rounds_they_are_kept_and_marked_noisy(machine):
    machine(lambda _k: BUSY)
    engine = TableEngine(SPEEDS, sigma=0.001)
    result = run(engine, min_repetitions=3, max_repetitions=4)
    assert result.rounds_discarded == 4 and result.rounds_kept == 3
    assert all(m.noisy for m in result.measurements)
    assert result.of(DRAFT).noise["disturbed_passes"] == 3
    assert len(engine.timed_order()) == 2 * (4 + 3)


def test_the_time_budget_caps_the_rounds_however_few_were_kept(machine):
    """budget_s (what is left of a study's --timeout) is hard: 0 s left stops after the first round,
    below min_repetitions, and the result says which cap it hit."""
    progress: list[str] = []
    result = measure_repeatedly(TableEngine(SPEEDS, sigma=0.001), [DRAFT], RunShape(WORKLOAD, 1),
                                options=ProtocolOptions(min_repetitions=3, budget_s=0.0), progress=progress.append)
    assert (result.rounds_kept, result.capped) == (1, "budget")
    assert result.of(DRAFT).repetitions == 1 and result.options.budget_s == 0.0


def test_discarded_rounds_count_against_the_time_budget(machine):
    """A machine busy all along: the disturbed round is discarded, its time counted, and with nothing
    kept when the budget is spent the run fails naming the disturbance; the progress named it first."""
    machine(lambda _k: BUSY)
    progress: list[str] = []
    with pytest.raises(EngineFault, match="time budget ran out before a round could be kept.*1.50 of 2 cores"):
        measure_repeatedly(TableEngine(SPEEDS, sigma=0.001), [DRAFT], RunShape(WORKLOAD, 1),
                           options=ProtocolOptions(min_repetitions=3, budget_s=0.0), progress=progress.append)
    assert progress[-1] == ("round 1 at concurrency 1: none pass disturbed (other processes use 1.50 of 2 cores): "
                            "re-measuring")


def test_a_negative_budget_is_refused():
    with pytest.raises(ConfigurationError, match="budget seconds"):
        ProtocolOptions(budget_s=-1.0).validate()


def test_implausible_rounds_are_never_kept(machine):
    """Acceptance 1.0 with a 1.5x speedup cannot be: after 2 x max_repetitions tries, an EngineFault."""
    engine = TableEngine(SPEEDS, sigma=0.001, acceptance={DRAFT: 1.0})
    with pytest.raises(EngineFault, match="no plausible round in 6 tries at concurrency 1") as caught:
        run(engine, min_repetitions=2, max_repetitions=3)
    assert isinstance(caught.value, EngineError)


# --- racing ----------------------------------------------------------------------------------------


def test_racing_drops_a_clearly_slower_configuration(machine):
    engine = TableEngine(SPEEDS, sigma=0.02, seed=2)
    result = run(engine, [DRAFT, NGRAM], min_repetitions=3, max_repetitions=6, precision=0.001, race=True)
    ngram, draft, base = result.of(NGRAM), result.of(DRAFT), result.baseline
    assert ngram.dropped and ngram.repetitions == 3 and ngram.rounds == [0, 1, 2]
    assert ngram.capped is None  # it did not run to the cap
    assert not draft.dropped and draft.repetitions == 6 and draft.capped == "repetitions"
    assert not base.dropped and base.repetitions == 6  # slower than the leader, but the baseline stays
    assert engine.timed_order()[9:].count(NGRAM) == 0  # not measured after round 3
    assert ngram.speedup.n == 3  # its figures so far are kept
    assert result.compare(NGRAM, DRAFT).n == 3  # over the rounds both ran


def test_without_racing_nothing_is_dropped(machine):
    engine = TableEngine(SPEEDS, sigma=0.02, seed=2)
    result = run(engine, [DRAFT, NGRAM], min_repetitions=3, max_repetitions=6, precision=0.001)
    assert not any(m.dropped for m in result.measurements)
    assert result.of(NGRAM).repetitions == 6


def test_racing_keeps_configurations_that_are_not_clearly_slower(machine):
    close = {BASELINE: 100.0, DRAFT: 150.0, NGRAM: 149.0}
    engine = TableEngine(close, sigma=0.05, seed=4, acceptance={NGRAM: 2.0})
    result = run(engine, [DRAFT, NGRAM], min_repetitions=3, max_repetitions=4, precision=0.001, race=True)
    assert not any(m.dropped for m in result.measurements)


def test_racing_without_a_baseline_still_stops_at_max_repetitions(machine, monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(protocol.time, "monotonic", lambda: clock[0])
    engine = TableEngine(SPEEDS, sigma=0.02, seed=2)
    measure = engine.measure

    def timed(workload, concurrency, temperature=None, seed=0):
        clock[0] += 1.0
        return measure(workload, concurrency, temperature, seed)

    engine.measure = timed
    result = run(engine, [NGRAM, DRAFT], baseline=False, min_repetitions=3, max_repetitions=5, precision=0.001,
                 race=True, max_seconds=100.0)
    assert result.of(NGRAM).dropped
    assert result.of(DRAFT).repetitions == 5 and result.rounds_kept == 5 and result.capped == "repetitions"


# --- options ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"precision": 0}, "precision"),
        ({"precision": 1}, "precision"),
        ({"precision": 2}, "precision"),
        ({"precision": -0.05}, "precision"),
        ({"precision": "0.05"}, "precision"),
        ({"precision": True}, "precision"),
        ({"precision": math.nan}, "precision"),
        ({"min_repetitions": 0}, "min repetitions"),
        ({"min_repetitions": 2.5}, "min repetitions"),
        ({"min_repetitions": True}, "min repetitions"),
        ({"max_repetitions": 0}, "max repetitions"),
        ({"min_repetitions": 5, "max_repetitions": 4}, r"max repetitions \(4\) is below min repetitions \(5\)"),
        ({"max_seconds": 0}, "max seconds"),
        ({"max_seconds": -1.0}, "max seconds"),
        ({"max_seconds": math.inf}, "max seconds"),
        ({"max_seconds": math.nan}, "max seconds"),
        ({"max_seconds": "60"}, "max seconds"),
        ({"unresolved_seconds": -1.0}, "unresolved seconds"),
        ({"unresolved_seconds": math.inf}, "unresolved seconds"),
    ],
)
def test_options_validate(options, match):
    with pytest.raises(ConfigurationError, match=match):
        ProtocolOptions(**options).validate()


def test_bad_options_fail_before_the_engine_is_used(machine):
    engine = TableEngine(SPEEDS)
    with pytest.raises(ConfigurationError):
        run(engine, min_repetitions=3, max_repetitions=2)
    assert engine.calls == [] and engine.loads == 0


def test_default_options_are_valid():
    options = ProtocolOptions()
    options.validate()
    assert (options.precision, options.min_repetitions, options.max_repetitions) == (0.05, 3, 10)
    assert ProtocolOptions(**options.to_dict()) == options


# --- serialisation and comparison ------------------------------------------------------------------


def test_result_round_trip_through_json(machine):
    machine(lambda k: BUSY if k == 2 else QUIET)
    engine = TableEngine(SPEEDS, sigma=0.02, seed=9)
    result = run(engine, [DRAFT, NGRAM], min_repetitions=3, max_repetitions=5, race=True, precision=0.001)
    data = json.loads(json.dumps(result.to_dict()))
    again = ProtocolResult.from_dict(data)
    assert again.to_dict() == data
    assert again.options == result.options and again.faults == result.faults
    assert again.rounds_discarded == result.rounds_discarded == 1 and again.capped == result.capped
    for before, after in zip(result.measurements, again.measurements):
        assert after.config == before.config and after.estimates == before.estimates
        assert after.samples == before.samples and after.rounds == before.rounds and after.dropped == before.dropped
        # outputs are left out unless asked for
        assert after.measurement == type(before.measurement)(**{**before.measurement.to_dict(), "outputs": None})
    with_outputs = ProtocolResult.from_dict(json.loads(json.dumps(result.to_dict(include_outputs=True))))
    assert with_outputs.of(DRAFT).measurement == result.of(DRAFT).measurement


def test_repeated_measurement_round_trip(machine):
    result = run(TableEngine(SPEEDS), min_repetitions=3, max_repetitions=3)
    repeated = result.of(DRAFT)
    again = RepeatedMeasurement.from_dict(json.loads(json.dumps(repeated.to_dict(include_outputs=True))))
    assert again == repeated
    assert again.to_dict()["repetitions"] == 3


def test_the_off_state_survives_the_round_trip(machine):
    """A confirmation's measurements come back from the worker process as JSON: a K = 0 point that
    lost its flag matched no candidate and was stored as a second baseline (seen in a vLLM study)."""
    off = EngineConfig("draft", 0, None, off_state=True)
    result = run(TableEngine({**SPEEDS, off: 90.0}), [off], min_repetitions=3, max_repetitions=3)
    again = ProtocolResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert [m.config for m in again.measurements] == [m.config for m in result.measurements]
    assert again.of(off).config.off_state


def test_compare(machine):
    engine = TableEngine(SPEEDS, sigma=0.02, seed=6)
    result = run(engine, [DRAFT, MTP], min_repetitions=4, max_repetitions=4)
    forward = result.compare(DRAFT, BASELINE)
    assert forward == result.of(DRAFT).speedup
    backward = result.compare(BASELINE, DRAFT)
    assert backward.value == pytest.approx(1 / forward.value)
    assert backward.low == pytest.approx(1 / forward.high) and backward.high == pytest.approx(1 / forward.low)
    mtp_over_draft = result.compare(MTP, DRAFT)
    assert mtp_over_draft.low <= 180 / 150 <= mtp_over_draft.high
    assert mtp_over_draft.value == pytest.approx(result.of(MTP).speedup.value / forward.value)


def test_compare_needs_a_shared_round(machine):
    result = run(TableEngine(SPEEDS), min_repetitions=3, max_repetitions=3)
    a, b = result.of(DRAFT), result.baseline
    late = RepeatedMeasurement(a.config, a.concurrency, a.measurement, a.estimates, a.samples, [7, 8, 9], a.noise)
    with pytest.raises(ValueError, match="share no round"):
        compare_samples(late, b)


def test_progress_names_each_pass(machine):
    lines: list[str] = []
    measure_repeatedly(TableEngine(SPEEDS), [DRAFT], RunShape(WORKLOAD, 2), options=ProtocolOptions(min_repetitions=2,
                       max_repetitions=2), progress=lines.append)
    assert lines == ["round 1: none at concurrency 2", "round 1: draft@4 at concurrency 2",
                     "round 2: draft@4 at concurrency 2", "round 2: none at concurrency 2"]
