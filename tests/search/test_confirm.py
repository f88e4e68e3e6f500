"""The confirmation phase's finalists (:func:`autotune.search.confirm.finalists`), from screening rows,
and its retries of a concurrency whose worker failed."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest

from autotune.engines.base import EngineConfig
from autotune.engines.protocol import ProtocolOptions
from autotune.engines.worker import WorkerFailure
from autotune.perfmodel.model import Prediction
from autotune.search.confirm import MAX_FINALISTS, SCREENING_NOISE, ConfirmRun, confirm, finalists
from autotune.search.guide import GUIDE_Z
from autotune.search.objective import Slo
from autotune.search.space import Candidate
from autotune.store.results import TrialRow


def row(method: str, depth: int, concurrency: int, tokens: float | None, *, number: int = 0, draft: str | None = None,
        tpot: float | None = None, state: str = "complete", phase: str = "screening") -> TrialRow:
    if method == "draft" and draft is None:
        draft = "builtin"
    return TrialRow(trial_number=number, method=method, draft=draft, depth=depth, concurrency=concurrency, state=state,
                    reason=None, tokens_per_s=tokens, tpot_ms_p50=tpot, tpot_ms_p90=tpot, phase=phase,
                    extra={"confirmation": {"run": 1}} if phase == "confirmation" else {})


def numbered(rows: list[TrialRow]) -> list[TrialRow]:
    """The same rows with distinct trial numbers, in a seeded shuffled order (order must not matter)."""
    shuffled = [TrialRow(**{**row.__dict__, "trial_number": i}) for i, row in enumerate(rows)]
    random.Random(0).shuffle(shuffled)
    return shuffled


def labels(chosen: list[Candidate]) -> list[str]:
    return [c.config_label for c in chosen]


def test_the_optimistic_bound():
    assert SCREENING_NOISE == 0.25
    rows = numbered([
        row("none", 0, 4, 900.0), row("mtp", 2, 4, 1200.0),
        row("draft", 4, 4, 960.0),  # 960 * 1.25 = 1200: reaches the best, so it is a finalist
        row("ngram", 3, 4, 950.0),  # 950 * 1.25 = 1187.5: cannot be the best even if screening undersold it
    ])
    chosen = finalists(rows, [4], Slo())
    assert labels(chosen[4]) == ["mtp@2", "draft@4"]
    assert all(c.concurrency == 4 for c in chosen[4])
    assert chosen[4][1] == Candidate("draft", 4, 4, "builtin")


def test_the_baseline_counts_as_the_best_but_is_never_a_finalist():
    rows = numbered([row("none", 0, 8, 1000.0), row("mtp", 1, 8, 800.0), row("mtp", 2, 8, 790.0),
                     row("none", 0, 16, 2000.0)])
    chosen = finalists(rows, [8, 16], Slo())
    assert labels(chosen[8]) == ["mtp@1"]  # 800 * 1.25 = 1000; 790 * 1.25 < 1000
    assert chosen[16] == []  # only the baseline was screened there: nothing to confirm but it


def test_at_most_four_the_fastest_then_the_simplest():
    rows = numbered([
        row("none", 0, 2, 700.0),
        row("draft", 3, 2, 1200.0), row("draft", 5, 2, 1190.0), row("draft", 7, 2, 1180.0), row("draft", 2, 2, 1170.0),
        row("mtp", 1, 2, 990.0), row("mtp", 2, 2, 1000.0), row("ngram", 4, 2, 980.0),
        row("ngram", 1, 2, 900.0),  # out of reach: 900 * 1.25 < 1200
    ])
    chosen = finalists(rows, [2], Slo())
    assert MAX_FINALISTS == 4
    assert labels(chosen[2]) == ["draft@3", "ngram@4", "mtp@1", "mtp@2"]


def test_the_simplest_runners_up_come_first_smaller_depth_first():
    rows = numbered([
        row("none", 0, 1, 500.0), row("draft", 3, 1, 1000.0), row("draft", 4, 1, 995.0), row("draft", 5, 1, 990.0),
        row("draft", 2, 1, 985.0), row("draft", 3, 1, 850.0, draft="small"),
    ])
    chosen = finalists(rows, [1], Slo())
    assert labels(chosen[1]) == ["draft@3", "draft@2", "draft:small@3", "draft@4"]


def test_repeated_trials_of_one_configuration_are_confirmed_once():
    rows = numbered([row("none", 0, 4, 900.0), row("mtp", 2, 4, 1200.0), row("mtp", 2, 4, 1150.0),
                     row("draft", 3, 4, 1100.0), row("draft", 3, 4, 1000.0)])
    assert labels(finalists(rows, [4], Slo())[4]) == ["mtp@2", "draft@3"]


def test_the_slo_pool():
    slo = Slo(tpot_ms=20.0)
    rows = numbered([
        row("none", 0, 4, 1000.0, tpot=15.0),
        row("draft", 6, 4, 1500.0, tpot=25.0),  # fastest, but misses the SLO: neither a finalist nor the bar
        row("mtp", 1, 4, 1100.0, tpot=12.0),
        row("draft", 3, 4, 800.0, tpot=18.0),  # 800 * 1.25 = 1000 < 1100
        row("ngram", 2, 4, 880.0, tpot=19.0),  # 880 * 1.25 = 1100: in reach
    ])
    assert labels(finalists(rows, [4], slo)[4]) == ["mtp@1", "ngram@2"]
    assert labels(finalists(rows, [4], Slo())[4]) == ["draft@6"]  # without limits: 1100 * 1.25 < 1500


def test_when_nothing_meets_the_slo_the_closest_misses_form_the_pool():
    slo = Slo(tpot_ms=10.0)
    rows = numbered([
        row("none", 0, 4, 1000.0, tpot=15.0), row("mtp", 1, 4, 1100.0, tpot=12.0), row("mtp", 3, 4, 900.0, tpot=12.0),
        row("draft", 6, 4, 1500.0, tpot=25.0),
    ])
    assert labels(finalists(rows, [4], slo)[4]) == ["mtp@1", "mtp@3"]  # 900 * 1.25 = 1125 >= 1100


def test_only_complete_screening_rows_count():
    rows = numbered([
        row("none", 0, 4, 1000.0), row("mtp", 2, 4, 1100.0),
        row("draft", 3, 4, 5000.0, phase="confirmation"),  # a confirmation row is no screening figure
        row("draft", 5, 4, None, state="failed"), row("ngram", 3, 4, None, state="infeasible"),
        row("mtp", 2, 8, None, state="failed"),
    ])
    chosen = finalists(rows, [4, 8, 16], Slo())
    assert labels(chosen[4]) == ["mtp@2"]
    assert 8 not in chosen and 16 not in chosen  # nothing complete was screened there


class FlakyWorker:
    """Fails its first protocol runs with the given failure kinds, then answers."""

    def __init__(self, kinds: list[str]) -> None:
        self.kinds = kinds
        self.calls = 0
        self.loads = 0  # EngineWorker's build counter: each run builds one engine here
        self.hints: list[list[str]] = []  # what each keep() said would run next

    def keep(self, configs) -> None:  # noqa: ANN001 - EngineWorker's
        self.hints.append([config.label() for config in configs])

    def measure_repeatedly(self, configs, workload, concurrency, seed, options, notice):  # noqa: ANN001 - EngineWorker's
        self.calls += 1
        self.loads += 1
        if self.kinds:
            raise WorkerFailure(self.kinds.pop(0), "the worker died")
        return SimpleNamespace(baseline=None)  # no baseline figure: nothing for the neighbour check


def confirm_b1(worker: FlakyWorker, attempts: int):
    finalist = {1: [Candidate("ngram", 1, 1)]}
    return confirm(worker, finalist, ConfirmRun(lambda c: EngineConfig(c.method, c.depth), None, 0, ProtocolOptions(),
                                                attempts=attempts))[0]


@pytest.mark.parametrize(("kinds", "attempts", "calls", "failure"), [
    (["crash"], 2, 2, None),  # failed once, measured on the retry
    (["oom", "timeout"], 2, 2, "the worker died (failed 2 times)"),  # bounded
    (["unsupported"], 3, 1, "the worker died"),  # it would fail again: not retried
    (["crash"], 1, 1, "the worker died"),  # no retries asked for
])
def test_a_failed_concurrency_is_confirmed_again_within_the_attempts(kinds, attempts, calls, failure) -> None:
    worker = FlakyWorker(kinds)
    batch = confirm_b1(worker, attempts)
    assert (worker.calls, batch.failure, batch.result is None) == (calls, failure, failure is not None)
    assert batch.loads == calls  # the builds of every attempt count


def test_each_concurrency_tells_the_worker_what_it_and_the_later_ones_run() -> None:
    """An engine that keeps several shuts down what no concurrency left needs first."""
    worker = FlakyWorker([])
    finalist = {1: [Candidate("ngram", 1, 1)], 2: [Candidate("ngram", 2, 2)], 4: [Candidate("mtp", 1, 4)]}
    confirm(worker, finalist, ConfirmRun(lambda c: EngineConfig(c.method, c.depth), None, 0, ProtocolOptions()))
    assert worker.hints == [["none", "ngram@1", "ngram@2", "mtp@1"], ["none", "ngram@2", "mtp@1"], ["none", "mtp@1"]]


# -- the study's time budget -------------------------------------------------------------------------


class ClockedWorker:
    """Answers every protocol run, advancing the fake clock by ``seconds`` (a failure after the
    ``fail_after`` th call); records the budget each run was given."""

    def __init__(self, clock: list[float], seconds: float, fail_after: int | None = None) -> None:
        self.clock, self.seconds, self.fail_after = clock, seconds, fail_after
        self.budgets: list[float | None] = []
        self.loads = 0  # EngineWorker's build counter (nothing is built here)

    def keep(self, configs) -> None:  # noqa: ANN001 - EngineWorker's
        pass

    def measure_repeatedly(self, configs, workload, concurrency, seed, options, notice):  # noqa: ANN001 - EngineWorker's
        self.budgets.append(options.budget_s)
        self.clock[0] += self.seconds
        if self.fail_after is not None and len(self.budgets) > self.fail_after:
            raise WorkerFailure("engine_error", "the time budget ran out before a round could be kept at concurrency 2")
        return SimpleNamespace(baseline=None)


@pytest.fixture
def clock(monkeypatch) -> list[float]:
    """The deadline's clock, moved by the test (no waiting, no wall-clock assertion)."""
    from autotune.search import deadline

    now = [100.0]
    monkeypatch.setattr(deadline, "time", SimpleNamespace(monotonic=lambda: now[0]))
    return now


def confirm_b1_b2_b4(worker, budget_s: float):  # noqa: ANN001 - a fake EngineWorker
    from autotune.search.deadline import Deadline

    finalist = {b: [Candidate("ngram", 1, b)] for b in (1, 2, 4)}
    return confirm(worker, finalist, ConfirmRun(lambda c: EngineConfig(c.method, c.depth), None, 0, ProtocolOptions(),
                                                attempts=2, deadline=Deadline.start(budget_s)))


def test_the_budget_left_caps_each_concurrency_and_none_starts_after_it(clock) -> None:
    worker = ClockedWorker(clock, seconds=40.0)
    batches = confirm_b1_b2_b4(worker, budget_s=60.0)
    assert worker.budgets == [60.0, 20.0]  # concurrency 4 came after the deadline: not started
    assert [(b.concurrency, b.out_of_time, b.result is None) for b in batches] == [(1, False, False), (2, False, False),
                                                                               (4, True, True)]


def test_a_concurrency_that_kept_no_round_in_time_is_out_of_time_not_failed(clock) -> None:
    worker = ClockedWorker(clock, seconds=40.0, fail_after=1)
    batches = confirm_b1_b2_b4(worker, budget_s=60.0)
    assert worker.budgets == [60.0, 20.0]  # no retry of concurrency 2 after the deadline
    assert [(b.concurrency, b.out_of_time) for b in batches] == [(1, False), (2, True), (4, True)]
    assert "time budget ran out" in batches[1].failure


def predicted(value: float, sigma: float, tpot: float | None = None) -> Prediction:
    latency = {"tpot_ms_p90": tpot} if tpot is not None else {}
    return Prediction(value, value, value, sigma, {}, 1.0, 1.0, "timed", latency)


def test_the_best_unmeasured_configuration_whose_optimistic_bound_reaches_the_leader_joins():
    rows = numbered([row("none", 0, 4, 900.0), row("mtp", 2, 4, 1200.0)])
    reach = 1200.0 / math.exp(GUIDE_Z * 0.1)  # its bound at z = GUIDE_Z is exactly the leader
    guesses = {
        Candidate("mtp", 3, 4): predicted(reach * 1.01, 0.1),   # the best prediction that reaches: joins
        Candidate("mtp", 1, 4): predicted(reach * 1.001, 0.1),  # reaches too, but predicted lower
        Candidate("ngram", 2, 4): predicted(1000.0, 0.05),      # 1000 x e^0.05 < 1200: cannot reach
        Candidate("mtp", 3, 8): predicted(5000.0, 0.1),         # another concurrency, nothing screened there
    }
    chosen = finalists(rows, [4, 8], Slo(), guesses)
    assert labels(chosen[4]) == ["mtp@2", "mtp@3"] and 8 not in chosen
    assert labels(finalists(rows, [4], Slo(), {Candidate("ngram", 2, 4): guesses[Candidate("ngram", 2, 4)]})[4]) == ["mtp@2"]
    assert labels(finalists(rows, [4], Slo())[4]) == ["mtp@2"]  # no model: screened finalists only


def test_a_measured_configuration_screened_low_joins_on_its_prediction():
    """vLLM's draft@4 c4 screened a third low (447 against 669 confirmed): its pass x 1.25 missed the
    leader, its prediction did not (docs/benchmarks.md)."""
    rows = numbered([row("none", 0, 4, 400.0), row("draft", 3, 4, 654.0), row("draft", 4, 4, 447.0)])
    d3, d4 = Candidate("draft", 3, 4, "builtin"), Candidate("draft", 4, 4, "builtin")
    guesses = {d4: predicted(690.0, 0.1), d3: predicted(640.0, 0.1)}
    assert labels(finalists(rows, [4], Slo())[4]) == ["draft@3"]  # the pass alone: left out
    assert labels(finalists(rows, [4], Slo(), guesses)[4]) == ["draft@3", "draft@4"]
    # The best prediction is a finalist already: the next one that reaches joins instead, once.
    guesses[d3] = predicted(700.0, 0.1)
    assert labels(finalists(rows, [4], Slo(), guesses)[4]) == ["draft@3", "draft@4"]


def test_an_unmeasured_configuration_predicted_to_miss_the_slo_does_not_join():
    rows = numbered([row("none", 0, 4, 900.0, tpot=5.0), row("mtp", 2, 4, 1200.0, tpot=5.0)])
    guesses = {Candidate("mtp", 3, 4): predicted(1300.0, 0.1, tpot=12.0)}
    assert labels(finalists(rows, [4], Slo(tpot_ms=10.0), guesses)[4]) == ["mtp@2"]
    assert labels(finalists(rows, [4], Slo(tpot_ms=20.0), guesses)[4]) == ["mtp@2", "mtp@3"]


def test_where_none_leads_depth_1_of_every_configuration_that_cannot_be_switched_off_joins():
    """TensorRT-LLM serves one-model MTP / EAGLE-3 at draft length 1 where none wins (PR #16888), so
    the confirmation measures that floor against none; two-model kinds may be switched off."""
    rows = numbered([
        row("none", 0, 2, 500.0), row("mtp", 3, 2, 900.0), row("draft", 2, 2, 700.0),
        row("none", 0, 8, 1000.0), row("mtp", 2, 8, 700.0), row("draft", 2, 8, 650.0),  # none leads at 8
        row("ngram", 2, 8, 990.0),
    ])
    one_model = {"mtp"}
    chosen = finalists(rows, [2, 8], Slo(), floor=lambda c: 1 if c.method in one_model else 0)
    assert labels(chosen[2]) == ["mtp@3"]  # speculation leads: nothing added
    assert labels(chosen[8]) == ["ngram@2", "mtp@1"]  # ngram@2 is near the leader; mtp@1 is mtp's floor
    assert chosen[8][1] == Candidate("mtp", 1, 8, None)
    assert labels(finalists(rows, [8], Slo())[8]) == ["ngram@2"]  # no floor given (the embedded engine): as before
    already = numbered([*rows, row("mtp", 1, 8, 985.0)])  # mtp@1 is a finalist on its own: listed once
    assert labels(finalists(already, [8], Slo(), floor=lambda c: 1 if c.method in one_model else 0)[8]) == \
        ["ngram@2", "mtp@1"]


def test_the_study_setup_asks_its_engines_rule_for_the_floor():
    from autotune.search.setup import StudySetup

    eagle = SimpleNamespace(folder=SimpleNamespace(config={"architectures": ["LlamaForCausalLMEagle3"]}))
    whole = SimpleNamespace(folder=SimpleNamespace(config={"architectures": ["LlamaForCausalLM"]}))
    drafts = {"head": eagle, "small": whole}
    floors = {engine: [StudySetup.off_floor(SimpleNamespace(engine=engine, drafts=drafts), Candidate(m, 1, 8, d))
                       for m, d in (("mtp", None), ("draft", "head"), ("draft", "small"), ("ngram", None))]
              for engine in ("trtllm", "vllm", "embedded")}
    assert floors == {"trtllm": [1, 1, 0, 0], "vllm": [0, 0, 0, 0], "embedded": [0, 0, 0, 0]}


def test_where_none_leads_on_vllm_k_0_inside_the_server_joins():
    """vLLM serves a 0 in its schedule with the drafter still running (VLLM_OFF_RULE), so where none
    leads the confirmation measures that K = 0 (a candidate at depth 0) to price the off state."""
    rows = numbered([
        row("none", 0, 2, 500.0), row("draft", 2, 2, 700.0),
        row("none", 0, 8, 1000.0), row("draft", 2, 8, 650.0), row("ngram", 2, 8, 600.0),  # none leads at 8
    ])
    chosen = finalists(rows, [2, 8], Slo(), floor=lambda c: 0, zero=lambda c: c.method == "draft")
    assert labels(chosen[2]) == ["draft@2"]  # speculation leads: nothing added
    assert chosen[8] == [Candidate("draft", 0, 8, "builtin")]  # draft@2 and ngram@2 are too slow to be finalists
    assert chosen[8][0].engine_config({"builtin": "/d"}).off_state  # run as K = 0 inside the speculative server


def test_the_study_setup_measures_k_0_on_vllm_only():
    from autotune.search.setup import StudySetup

    whole = SimpleNamespace(folder=SimpleNamespace(config={"architectures": ["LlamaForCausalLM"]}))

    def measured(engine: str) -> list[bool]:
        setup = SimpleNamespace(engine=engine, drafts={"small": whole})
        setup.off_floor = lambda c: StudySetup.off_floor(setup, c)
        return [StudySetup.zero_to_measure(setup, Candidate(m, 1, 8, d))
                for m, d in (("mtp", None), ("draft", "small"), ("ngram", None))]

    assert {engine: measured(engine) for engine in ("trtllm", "vllm", "embedded")} == {
        "trtllm": [False, False, False], "vllm": [True, True, True], "embedded": [False, False, False]}
