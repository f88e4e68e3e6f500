"""Screening passes under a disturbed machine (:mod:`autotune.search.screening`): re-measured while
other processes disturb them, the fastest kept when they all were, the row marked, and marked rows
kept away from the model-guided search. The background load is whatever the test says."""

from __future__ import annotations

from types import SimpleNamespace

from autotune.engines.noise import BackgroundLoad
from autotune.engines.protocol import Pass
from autotune.search.screening import MAX_DISTURBED_RERUNS, screen, undisturbed

QUIET = BackgroundLoad(other_cpu_cores=0.0, steal_fraction=0.0, load_avg_1m=0.1, cpu_count=2)
BUSY = BackgroundLoad(other_cpu_cores=1.8, steal_fraction=0.0, load_avg_1m=5.8, cpu_count=2)


def passes(*plan: tuple[float, BackgroundLoad]):
    """A measure() answering the planned (tokens/s, load) passes in turn; ``calls`` counts them."""
    answers = iter(plan)

    def measure() -> Pass:
        measure.calls += 1
        tokens, load = next(answers)
        return Pass(SimpleNamespace(tokens_per_s=tokens), load)

    measure.calls = 0
    return measure


def test_a_quiet_pass_is_measured_once_and_stores_nothing_extra() -> None:
    measure, said = passes((200.0, QUIET)), []
    kept = screen(measure, said.append)
    assert (measure.calls, kept.reruns, kept.disturbed, kept.extra(), said) == (1, 0, False, {}, [])


def test_a_disturbed_pass_is_measured_again_and_the_quiet_one_kept() -> None:
    measure, said = passes((30.0, BUSY), (210.0, QUIET)), []
    kept = screen(measure, said.append)
    assert (measure.calls, kept.measurement.tokens_per_s, kept.extra()) == (2, 210.0, {"disturbed_reruns": 1})
    assert said == ["other processes use 1.80 of 2 cores: re-measuring (1 of 2)"]


def test_a_machine_that_stays_busy_gets_a_bounded_number_of_reruns_and_a_marked_row() -> None:
    measure, said = passes((30.0, BUSY), (90.0, BUSY), (60.0, BUSY), (220.0, QUIET)), []
    kept = screen(measure, said.append)
    assert measure.calls == 1 + MAX_DISTURBED_RERUNS == 3
    assert kept.measurement.tokens_per_s == 90.0  # other work only slows a pass: the fastest is the least distorted
    assert kept.extra() == {"disturbed_reruns": 2, "disturbed": "other processes use 1.80 of 2 cores"}
    assert len(said) == 2


def test_no_rerun_once_the_time_budget_is_spent() -> None:
    measure = passes((30.0, BUSY), (210.0, QUIET))
    kept = screen(measure, in_time=lambda: False)
    assert (measure.calls, kept.extra()) == (1, {"disturbed": "other processes use 1.80 of 2 cores"})


def test_cpu_steal_is_named_too() -> None:
    stolen = BackgroundLoad(other_cpu_cores=None, steal_fraction=0.3, load_avg_1m=None, cpu_count=2)
    said: list[str] = []
    screen(passes((100.0, stolen), (120.0, QUIET)), said.append)
    assert said == ["CPU steal 30%: re-measuring (1 of 2)"]


def test_marked_rows_never_guide_the_search() -> None:
    rows = [SimpleNamespace(label="none b1", extra={}), SimpleNamespace(label="mtp@2 b1", extra={"disturbed_reruns": 1}),
            SimpleNamespace(label="draft@8 b1", extra={"disturbed": "other processes use 1.80 of 2 cores"})]
    assert [row.label for row in undisturbed(rows)] == ["none b1", "mtp@2 b1"]
