"""``autotune tune``'s progress on a pipe: one plain line per phase, finished trial and note, with
the time since the start and an ETA (a fake clock: nothing waits)."""

from __future__ import annotations

import io

from autotune.search import TuneProgress
from autotune.tune_progress import ProgressLines, clock_time


def test_one_line_per_phase_finished_trial_and_note() -> None:
    now = [0.0]
    out = io.StringIO()
    lines = ProgressLines(out, clock=lambda: now[0])
    lines(TuneProgress(0, 6, "timing step costs for 2 proposer(s)", kind="phase"))
    now[0] = 40.0
    lines(TuneProgress(0, 6, "none c1"))  # a trial starts: no line, its end follows
    now[0] = 50.0
    lines(TuneProgress(1, 6, "none c1", "complete", best="none c1 (212.0 tokens/s, one run)", tokens_per_s=212.04))
    lines(TuneProgress(1, 6, "mtp@2 c1"))
    now[0] = 55.0
    lines(TuneProgress(1, 6, "mtp@2 c1: other processes use 1.80 of 2 cores: re-measuring (1 of 2)", kind="note"))
    now[0] = 70.0
    lines(TuneProgress(2, 6, "mtp@2 c1", "complete", best="mtp@2 c1 (300.0 tokens/s, one run)", tokens_per_s=300.0,
                       predicted_tokens_per_s=280.0))
    lines(TuneProgress(2, 6, "draft@2 c1"))
    now[0] = 3725.0
    lines(TuneProgress(3, 6, "draft@2 c1", "failed", "timeout: no answer within 600 s"))
    assert out.getvalue().splitlines() == [
        "[0:00] timing step costs for 2 proposer(s)",
        "[0:50] trial 1/6 none c1: complete, 212.0 tok/s · best none c1 (212.0 tokens/s, one run) · at most 5 more, ~0:50",
        "[0:55] mtp@2 c1: other processes use 1.80 of 2 cores: re-measuring (1 of 2)",
        "[1:10] trial 2/6 mtp@2 c1: complete, 300.0 tok/s (predicted 280.0) · best mtp@2 c1 (300.0 tokens/s, one run)"
        " · at most 4 more, ~1:00",
        "[1:02:05] trial 3/6 draft@2 c1: failed (timeout: no answer within 600 s) · at most 3 more, ~1:01:25",
    ]


def test_clock_time() -> None:
    assert [clock_time(s) for s in (0, 59.6, 61, 3600, 3725)] == ["0:00", "1:00", "1:01", "1:00:00", "1:02:05"]


def test_the_trials_table_says_which_screening_pass_stayed_disturbed() -> None:
    from types import SimpleNamespace

    from autotune.render import trial_notes

    row = SimpleNamespace(reason=None, extra={"disturbed_reruns": 2, "disturbed": "other processes use 1.80 of 2 cores"})
    assert trial_notes(row) == ("screened while the machine was busy (other processes use 1.80 of 2 cores; 3 passes): "
                                "not used to guide the search")
    assert trial_notes(SimpleNamespace(reason=None, extra={"disturbed_reruns": 1})) is None  # the re-run was quiet
    loaded = SimpleNamespace(reason=None, extra={"loaded": "other processes use 1.80 of 2 cores"})
    assert trial_notes(loaded) == ("screened under a load that persisted (other processes use 1.80 of 2 cores): the "
                                   "loaded machine's figure, used to guide the search")


def test_the_trials_table_says_which_screening_pass_was_measured_again_for_its_surprise() -> None:
    from types import SimpleNamespace

    from autotune.render import trial_notes

    row = SimpleNamespace(reason=None, extra={"surprise_rerun": 917.4})
    assert trial_notes(row) == "screened twice: the first pass (917 tok/s) lay far below its prediction; the faster kept"
    failed = SimpleNamespace(reason=None, extra={"surprise_rerun": 917.4, "rerun_failed": "crash: worker exited with -9"})
    assert trial_notes(failed) == "measuring it again failed (crash: worker exited with -9): the pass before it stands"
