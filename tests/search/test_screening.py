"""Screening passes under a disturbed machine (:mod:`autotune.search.screening`): re-measured while
other processes disturb them, the fastest kept when they all were, the row marked, and marked rows
kept away from the model-guided search. The background load is whatever the test says."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from autotune.engines.noise import BackgroundLoad
from autotune.engines.protocol import Pass
from autotune.engines.worker import WorkerFailure
from autotune.search.screening import MAX_DISTURBED_RERUNS, SURPRISE_Z, MachineLoad, screen, surprise_floor, undisturbed

QUIET = BackgroundLoad(other_cpu_cores=0.0, steal_fraction=0.0, load_avg_1m=0.1, cpu_count=2)
BUSY = BackgroundLoad(other_cpu_cores=1.8, steal_fraction=0.0, load_avg_1m=5.8, cpu_count=2)


def passes(*setup: tuple[float, BackgroundLoad] | Exception, machine: MachineLoad | None = None):
    """A measure() answering the planned (tokens/s, load) passes in turn, raising a planned
    exception; ``calls`` counts them, ``threads`` lists ``machine.threads`` at each call."""
    answers = iter(setup)

    def measure() -> Pass:
        measure.calls += 1
        measure.threads.append(None if machine is None else machine.threads)
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        tokens, load = answer
        return Pass(SimpleNamespace(tokens_per_s=tokens), load)

    measure.calls, measure.threads = 0, []
    return measure


def persisting(machine: MachineLoad) -> MachineLoad:
    """``machine`` after a trial whose passes all stayed disturbed (the last on the core left)."""
    screen(passes((30.0, BUSY), (90.0, BUSY), (60.0, BUSY), (80.0, BUSY), machine=machine), machine=machine)
    assert machine.persists and machine.threads == 1 and machine.slowdown == 2.0  # 2 cores / the 1 left
    return machine


def test_a_quiet_pass_is_measured_once_and_stores_nothing_extra() -> None:
    measure, said = passes((200.0, QUIET)), []
    kept = screen(measure, said.append)
    assert (measure.calls, kept.reruns, kept.disturbed, kept.extra(), said) == (1, 0, False, {}, [])


def test_a_disturbed_pass_is_measured_again_and_the_quiet_one_kept() -> None:
    measure, said = passes((30.0, BUSY), (210.0, QUIET)), []
    kept = screen(measure, said.append)
    assert (measure.calls, kept.measurement.tokens_per_s, kept.extra()) == (2, 210.0, {"disturbed_reruns": 1})
    assert said == ["other processes use 1.80 of 2 cores: re-measuring (1 of 2)"]


def test_a_machine_that_stays_busy_gets_a_bounded_number_of_reruns_then_is_measured_under_its_load() -> None:
    machine, said = MachineLoad(), []
    measure = passes((30.0, BUSY), (90.0, BUSY), (60.0, BUSY), (150.0, BUSY), (220.0, QUIET), machine=machine)
    kept = screen(measure, said.append, machine=machine)
    # three passes on every core, then the load has outlasted the re-measurements: once more on the
    # one core the load leaves (2 cores - 1.8 used by others, rounded, at least one)
    assert measure.calls == 2 + MAX_DISTURBED_RERUNS == 4
    assert measure.threads == [None, None, None, 1]
    assert kept.measurement.tokens_per_s == 150.0
    # the row is the loaded machine's figure, and guides
    assert kept.extra() == {"disturbed_reruns": 2, "loaded": "other processes use 1.80 of 2 cores", "threads": 1}
    assert machine.persists and machine.threads == 1
    assert said[-1] == ("other processes use 1.80 of 2 cores through 3 passes: measuring under this load from now "
                        "on, on the 1 core(s) it leaves (absolute figures are the loaded machine's; speedups stay paired)")
    assert len(said) == 3


def test_while_a_load_persists_each_pass_is_measured_once_on_the_cores_left_and_kept() -> None:
    machine = persisting(MachineLoad())
    measure, said = passes((70.0, BUSY), (220.0, QUIET), machine=machine), []
    kept = screen(measure, said.append, machine=machine)
    assert (measure.calls, measure.threads, kept.measurement.tokens_per_s, said) == (1, [1], 70.0, [])
    assert kept.extra() == {"loaded": "other processes use 1.80 of 2 cores", "threads": 1}
    assert machine.persists


def test_a_quiet_pass_ends_the_load_gives_every_core_back_and_the_next_disturbed_pass_is_measured_again() -> None:
    machine = persisting(MachineLoad())
    measure, said = passes((200.0, QUIET), (230.0, QUIET), machine=machine), []
    kept = screen(measure, said.append, machine=machine)
    # the quiet pass ran on one thread: measured again on every core, and that figure kept
    assert (measure.threads, kept.measurement.tokens_per_s, kept.extra()) == ([1, None], 230.0, {})
    assert said == ["the load has gone: measuring again on every core"]
    assert not machine.persists and machine.threads is None and machine.slowdown == 1.0
    measure = passes((30.0, BUSY), (210.0, QUIET))
    assert screen(measure, machine=machine).extra() == {"disturbed_reruns": 1} and measure.calls == 2


def test_a_load_that_goes_as_the_cores_are_limited_leaves_a_pass_on_every_core() -> None:
    machine = MachineLoad()
    measure = passes((30.0, BUSY), (90.0, BUSY), (60.0, BUSY), (200.0, QUIET), (240.0, QUIET), machine=machine)
    kept = screen(measure, machine=machine)
    assert (measure.threads, kept.measurement.tokens_per_s) == ([None, None, None, 1, None], 240.0)
    assert not kept.disturbed and "threads" not in kept.extra() and "loaded" not in kept.extra()
    assert not machine.persists and machine.threads is None


def test_a_load_before_the_study_limits_the_threads_and_a_quiet_machine_or_an_engine_that_cannot_does_not() -> None:
    machine, said = MachineLoad(), []
    machine.at_start(BUSY, said.append)
    assert machine.threads == 1 and not machine.persists  # a load seen once: limited, not yet persisting
    assert said == ["other processes use 1.80 of 2 cores before the study starts: timing and measuring on the 1 "
                    "core(s) they leave"]
    quiet, fixed = MachineLoad(), MachineLoad(can_limit=False)
    quiet.at_start(QUIET, said.append)
    fixed.at_start(BUSY, said.append)
    assert (quiet.threads, fixed.threads, len(said)) == (None, None, 1)
    # an engine that cannot limit its threads still runs slower on what the load leaves
    assert (machine.slowdown, quiet.slowdown, fixed.slowdown) == (2.0, 1.0, 2.0)


def test_a_study_limited_from_the_start_measures_no_extra_pass_when_the_load_persists() -> None:
    machine = MachineLoad()
    machine.at_start(BUSY, lambda _text: None)
    measure = passes((30.0, BUSY), (90.0, BUSY), (60.0, BUSY), (70.0, BUSY), machine=machine)
    kept = screen(measure, machine=machine)
    assert (measure.calls, measure.threads, kept.measurement.tokens_per_s) == (3, [1, 1, 1], 90.0)
    assert kept.extra()["threads"] == 1 and machine.persists


def test_an_engine_that_cannot_limit_its_threads_is_measured_under_the_load_as_it_is() -> None:
    machine, said = MachineLoad(can_limit=False), []
    measure = passes((30.0, BUSY), (90.0, BUSY), (60.0, BUSY), (70.0, BUSY), machine=machine)
    kept = screen(measure, said.append, machine=machine)
    assert (measure.calls, kept.measurement.tokens_per_s, machine.threads) == (3, 90.0, None)
    assert "threads" not in kept.extra() and machine.persists
    assert said[-1] == ("other processes use 1.80 of 2 cores through 3 passes: measuring under this load from now "
                        "on (absolute figures are the loaded machine's; speedups stay paired)")


def test_the_cores_left_are_what_other_processes_do_not_use_and_at_least_one() -> None:
    def left(other: float | None, cores: int) -> int:
        return BackgroundLoad(other_cpu_cores=other, steal_fraction=0.0, load_avg_1m=None, cpu_count=cores).cores_left()

    assert (left(1.8, 2), left(1.0, 2), left(3.0, 2), left(2.1, 16), left(None, 8)) == (1, 1, 1, 14, 8)


def test_no_rerun_once_the_time_budget_is_spent() -> None:
    measure = passes((30.0, BUSY), (210.0, QUIET))
    kept = screen(measure, in_time=lambda: False)
    assert (measure.calls, kept.extra()) == (1, {"disturbed": "other processes use 1.80 of 2 cores"})


def test_cpu_steal_is_named_too() -> None:
    stolen = BackgroundLoad(other_cpu_cores=None, steal_fraction=0.3, load_avg_1m=None, cpu_count=2)
    said: list[str] = []
    screen(passes((100.0, stolen), (120.0, QUIET)), said.append)
    assert said == ["CPU steal 30%: re-measuring (1 of 2)"]


def test_disturbed_rows_never_guide_the_search_and_loaded_ones_do() -> None:
    rows = [SimpleNamespace(label="none c1", extra={}), SimpleNamespace(label="mtp@2 c1", extra={"disturbed_reruns": 1}),
            SimpleNamespace(label="draft@8 c1", extra={"disturbed": "other processes use 1.80 of 2 cores"}),
            SimpleNamespace(label="draft@8 c2", extra={"loaded": "other processes use 1.80 of 2 cores"})]
    assert [row.label for row in undisturbed(rows)] == ["none c1", "mtp@2 c1", "draft@8 c2"]


def test_a_quiet_pass_far_below_its_prediction_is_measured_once_more_and_the_faster_kept() -> None:
    measure, said = passes((917.0, QUIET), (1380.0, QUIET), (1400.0, QUIET)), []
    kept = screen(measure, said.append, floor=1100.0)
    assert (measure.calls, kept.measurement.tokens_per_s) == (2, 1380.0)
    assert kept.extra() == {"surprise_rerun": 917.0}  # the slower figure, for the trials table
    assert said == ["917 tok/s is far below the prediction (under 1100): re-measuring once"]


def test_a_surprising_pass_measured_slow_again_keeps_the_faster_of_the_two() -> None:
    measure = passes((917.0, QUIET), (890.0, QUIET))
    kept = screen(measure, floor=1100.0)
    assert (measure.calls, kept.measurement.tokens_per_s, kept.extra()) == (2, 917.0, {"surprise_rerun": 917.0})


def test_a_disturbed_second_pass_never_replaces_a_quiet_surprising_one() -> None:
    kept = screen(passes((917.0, QUIET), (1500.0, BUSY)), floor=1100.0)
    assert (kept.measurement.tokens_per_s, kept.disturbed) == (917.0, False)


@pytest.mark.parametrize("floor", [None, 900.0])
def test_a_pass_at_or_above_its_floor_or_without_a_prediction_is_measured_once(floor: float | None) -> None:
    measure = passes((917.0, QUIET), (1380.0, QUIET))
    assert (screen(measure, floor=floor).extra(), measure.calls) == ({}, 1)


def test_no_surprise_rerun_once_the_time_budget_is_spent_nor_for_a_pass_that_stayed_disturbed() -> None:
    measure = passes((917.0, QUIET), (1380.0, QUIET))
    assert (screen(measure, in_time=lambda: False, floor=1100.0).extra(), measure.calls) == ({}, 1)
    busy = passes((30.0, BUSY), (40.0, BUSY), (50.0, BUSY), (60.0, BUSY), (1380.0, QUIET))
    kept = screen(busy, floor=1100.0)  # three passes, then one on the core left: all disturbed
    assert (busy.calls, kept.measurement.tokens_per_s, "surprise_rerun" in kept.extra()) == (4, 60.0, False)


def test_the_floor_lies_surprise_z_sigmas_below_the_stored_prediction() -> None:
    prediction = {"tokens_per_s": {"value": 1451.0, "low": 1000.0, "high": 2000.0}, "sigma": 0.1}
    assert surprise_floor(prediction) == pytest.approx(1451.0 * math.exp(-SURPRISE_Z * 0.1))
    assert surprise_floor(None) is None and surprise_floor({}) is None


def test_a_repetition_that_fails_in_the_worker_leaves_the_pass_before_it_standing() -> None:
    # A disturbed pass whose re-run times out: the trial keeps its one (marked) pass instead of failing.
    measure, said = passes((30.0, BUSY), WorkerFailure("timeout", "no answer in 600 s"), (210.0, QUIET)), []
    kept = screen(measure, said.append)
    assert (measure.calls, kept.measurement.tokens_per_s, kept.disturbed) == (2, 30.0, True)
    assert kept.extra() == {"disturbed": "other processes use 1.80 of 2 cores",
                            "rerun_failed": "timeout: no answer in 600 s"}
    assert said[-1] == "measuring again failed (timeout: no answer in 600 s): keeping the pass measured before"
    # A surprising quiet pass whose second pass crashes: the first stands, quiet, and still guides.
    kept = screen(passes((917.0, QUIET), WorkerFailure("crash", "worker exited with -9")), floor=1100.0)
    assert (kept.measurement.tokens_per_s, kept.disturbed) == (917.0, False)
    assert kept.extra() == {"surprise_rerun": 917.0, "rerun_failed": "crash: worker exited with -9"}


def test_a_first_pass_that_fails_still_fails_the_trial() -> None:
    with pytest.raises(WorkerFailure):
        screen(passes(WorkerFailure("crash", "worker exited with -9")))
