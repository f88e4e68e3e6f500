"""Background load: counters from /proc, what counts as a disturbed pass, and a real disturbance."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from autotune.engines.noise import BackgroundLoad, Snapshot, between, snapshot, summarize, while_waiting

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

BUSY_LOOP = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def load(other=None, steal=None, cpu_count=2, **kwargs) -> BackgroundLoad:
    return BackgroundLoad(other_cpu_cores=other, steal_fraction=steal, load_avg_1m=kwargs.pop("load_avg", None),
                          cpu_count=cpu_count, **kwargs)


# --- thresholds ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("other", "cpu_count", "disturbed"),
    [
        (0.0, 2, False),
        (0.39, 2, False),  # 2 cores: the limit is max(0.3, 0.2 * 2) = 0.4
        (0.41, 2, True),
        (0.29, 1, False),  # 1 core: the floor of 0.3 cores
        (0.31, 1, True),
        (3.1, 16, False),  # 16 cores: 0.2 * 16 = 3.2
        (3.3, 16, True),
        (None, 2, False),  # nothing measured: not disturbed
    ],
)
def test_disturbed_by_other_cores(other, cpu_count, disturbed):
    assert load(other, 0.0, cpu_count).disturbed is disturbed


@pytest.mark.parametrize(("steal", "disturbed"), [(0.0, False), (0.1, False), (0.11, True), (0.5, True), (None, False)])
def test_disturbed_by_steal(steal, disturbed):
    assert load(0.0, steal).disturbed is disturbed
    assert load(None, steal).disturbed is disturbed


def test_to_dict():
    reading = load(0.5, 0.01, 4, load_avg=1.2, gpu_sm_clock_mhz=1980, gpu_utilization_pct=97)
    assert reading.to_dict() == {"other_cpu_cores": 0.5, "steal_fraction": 0.01, "load_avg_1m": 1.2, "cpu_count": 4,
                                 "gpu_sm_clock_mhz": 1980, "gpu_utilization_pct": 97}


# --- between on given counters ---------------------------------------------------------------------


def test_between_subtracts_our_own_cpu_time():
    before = Snapshot(monotonic_s=10.0, busy_s=100.0, total_s=1000.0, steal_s=1.0, own_s=20.0)
    after = Snapshot(monotonic_s=12.0, busy_s=104.0, total_s=1004.0, steal_s=1.2, own_s=21.0)
    reading = between(before, after)
    assert reading.other_cpu_cores == pytest.approx((4.0 - 1.0) / 2.0)  # busy 4 s, ours 1 s, over 2 s
    assert reading.steal_fraction == pytest.approx(0.2 / 4.0)
    assert reading.cpu_count >= 1


def test_between_never_reports_negative_load():
    before = Snapshot(0.0, 100.0, 1000.0, 0.0, 20.0)
    after = Snapshot(1.0, 100.5, 1002.0, 0.0, 21.0)  # ours exceeds the machine's (tick rounding)
    assert between(before, after).other_cpu_cores == 0.0


def test_between_without_counters_or_time_measures_nothing():
    missing = Snapshot(0.0, None, None, None, None)
    reading = between(missing, Snapshot(1.0, None, None, None, None))
    assert reading.other_cpu_cores is None and reading.steal_fraction is None and not reading.disturbed
    same = Snapshot(5.0, 1.0, 2.0, 0.0, 1.0)
    reading = between(same, same)
    assert reading.other_cpu_cores is None  # no wall time
    assert reading.steal_fraction == 0.0  # no CPU time elapsed


# --- summarize -------------------------------------------------------------------------------------


def test_summarize():
    loads = [
        load(0.1, 0.0, load_avg=0.5, gpu_sm_clock_mhz=1900),
        load(0.9, 0.02, load_avg=1.5, gpu_sm_clock_mhz=1500),
        load(None, None, load_avg=None),
    ]
    summary = summarize(loads)
    assert summary["passes"] == 3 and summary["disturbed_passes"] == 1
    assert summary["other_cpu_cores_mean"] == pytest.approx(0.5) and summary["other_cpu_cores_max"] == 0.9
    assert summary["steal_fraction_max"] == 0.02 and summary["load_avg_1m_max"] == 1.5
    assert summary["gpu_sm_clock_mhz_min"] == 1500 and summary["gpu_sm_clock_mhz_max"] == 1900


def test_summarize_nothing():
    summary = summarize([])
    assert summary["passes"] == 0 and summary["disturbed_passes"] == 0
    assert all(value is None for key, value in summary.items() if key not in ("passes", "disturbed_passes"))


# --- on this machine -------------------------------------------------------------------------------


@linux_only
def test_snapshot_and_between_read_this_machine():
    before = snapshot()
    time.sleep(0.2)
    after = snapshot()
    assert None not in (before.busy_s, before.total_s, before.steal_s, before.own_s)
    assert after.monotonic_s > before.monotonic_s and after.total_s >= before.total_s
    assert after.own_s >= before.own_s
    reading = between(before, after)
    assert reading.other_cpu_cores is not None and reading.other_cpu_cores >= 0
    assert reading.steal_fraction is not None and 0 <= reading.steal_fraction <= 1
    assert reading.cpu_count >= 1
    assert reading.load_avg_1m is not None and reading.load_avg_1m >= 0


def _burn(seconds: float, new_session: bool) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", BUSY_LOOP.format(seconds=seconds)], start_new_session=new_session)
    time.sleep(0.4)  # past the interpreter's start-up: the loop is running
    return process


def _snapshots_while_burning(seconds: float, new_session: bool):  # noqa: ANN202 - (Snapshot, Snapshot)
    """Snapshots ``seconds`` apart while a busy process (in a new session or in ours) burns a core."""
    process = _burn(3.0, new_session=new_session)
    try:
        before = snapshot()
        time.sleep(seconds)
        return before, snapshot()
    finally:
        process.kill()
        process.wait()


@linux_only
def test_a_process_of_another_session_burning_a_core_is_other_load():
    before, after = _snapshots_while_burning(1.2, new_session=True)
    reading = between(before, after)
    wall = after.monotonic_s - before.monotonic_s
    assert reading.other_cpu_cores > 0.5, reading
    assert after.own_s - before.own_s < 0.3 * wall  # we slept: the burning process is not ours
    if reading.cpu_count <= 2:  # one busy core is above the limit of a 2-core machine (0.4 cores)
        assert reading.disturbed


@linux_only
def test_cpu_burnt_in_our_own_process_is_not_other_load():
    before, cpu_before = snapshot(), time.process_time()
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        pass
    after, cpu_after = snapshot(), time.process_time()
    reading = between(before, after)
    wall = after.monotonic_s - before.monotonic_s
    ours = cpu_after - cpu_before
    assert ours > 0.3 * wall  # we did get a core for a good part of the second
    assert after.own_s - before.own_s >= ours - 0.05  # ... and it was counted as ours
    busy = (after.busy_s - before.busy_s) / wall
    # Whatever else ran on the machine, our own burn is not in "other" (on a quiet machine it is ~0).
    assert reading.other_cpu_cores <= max(0.0, busy - ours / wall) + 0.1


@linux_only
def test_a_child_process_in_our_session_is_ours():
    """An engine's helper processes (same session) are part of the measurement, not disturbance."""
    before, after = _snapshots_while_burning(1.0, new_session=False)
    wall = after.monotonic_s - before.monotonic_s
    assert after.own_s - before.own_s > 0.3 * wall


@linux_only
def test_a_child_of_our_session_that_ends_during_the_pass_is_not_other_load():
    process = _burn(1.4, new_session=False)
    before = snapshot()
    process.wait()  # ends (and is reaped) during the "pass"
    time.sleep(0.3)
    after = snapshot()
    reading = between(before, after)
    assert after.own_s >= before.own_s
    assert reading.other_cpu_cores <= reading.cpu_count


@linux_only
def test_the_reading_before_a_study_counts_a_process_of_our_own_session_as_other_load():
    """Before any engine runs, only this process is ours: a busy loop the user's shell started
    (the caller's session) is other work, as it is for the engine it would slow down."""
    process = _burn(3.0, new_session=False)
    try:
        load = while_waiting(1.0)
    finally:
        process.kill()
        process.wait()
    assert load.other_cpu_cores > 0.5, load  # one core, less whatever else this machine is doing
