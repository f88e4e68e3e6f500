"""The machine's background load around a measurement: what else ran while we timed.

Cheap readings only, taken before and after each pass:

* ``other_cpu_cores``: CPU time the whole machine spent busy (``/proc/stat``) minus the CPU time of
  our own session's processes (``/proc/<pid>/stat``; the engine worker leads its own session, so an
  engine's helper processes count as ours), over the pass's wall time: how many cores other work
  kept busy. The direct measure of a disturbed pass on a CPU; Linux only (None elsewhere).
* ``steal_fraction``: the share of CPU time the hypervisor gave to other guests.
* ``load_avg_1m``: the kernel's 1-minute load average (lags; kept for the record).
* On NVIDIA GPUs, where NVML is present: SM clock (MHz) and utilisation (%) at the end of the pass
  (a throttled clock explains a slow pass). Read only when ``pynvml`` imports and finds a GPU.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

PROC = Path("/proc")
# A pass is disturbed when other work kept this share of the machine's cores busy (at least
# MIN_DISTURBED_CORES): on our 2-core machines, 0.4 cores, i.e. a process burning one core for 40 %
# of the pass.
DISTURBED_CORE_FRACTION = 0.2
MIN_DISTURBED_CORES = 0.3
DISTURBED_STEAL_FRACTION = 0.1


@dataclass(frozen=True)
class Snapshot:
    """Counters at one moment (None where this system does not have them)."""

    monotonic_s: float
    busy_s: float | None  # machine-wide busy CPU seconds (steal excluded)
    total_s: float | None  # machine-wide CPU seconds
    steal_s: float | None
    own_s: float | None  # CPU seconds of our session's processes


@dataclass(frozen=True)
class BackgroundLoad:
    """What the machine did besides our measurement during one pass (see the module doc)."""

    other_cpu_cores: float | None
    steal_fraction: float | None
    load_avg_1m: float | None
    cpu_count: int
    gpu_sm_clock_mhz: int | None = None
    gpu_utilization_pct: int | None = None

    @property
    def disturbed(self) -> bool:
        """True when other work took enough of the machine to distort a timing."""
        limit = max(MIN_DISTURBED_CORES, DISTURBED_CORE_FRACTION * self.cpu_count)
        if self.other_cpu_cores is not None and self.other_cpu_cores > limit:
            return True
        return self.steal_fraction is not None and self.steal_fraction > DISTURBED_STEAL_FRACTION

    def cores_left(self) -> int:
        """The cores other processes leave this one (at least one): the threads to measure with
        under a load that persists."""
        return max(1, round(self.cpu_count - (self.other_cpu_cores or 0.0)))

    def describe(self) -> str:
        """What disturbed the pass, in a few words, e.g. "other processes use 1.80 of 2 cores"."""
        if self.other_cpu_cores is not None and self.other_cpu_cores > 0:
            return f"other processes use {self.other_cpu_cores:.2f} of {self.cpu_count} cores"
        return f"CPU steal {self.steal_fraction or 0:.0%}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BackgroundLoad:
        return cls(**data)


def snapshot(own: Callable[[], float | None] | None = None) -> Snapshot:
    """The counters now; ``own``: the CPU seconds that count as ours (default: our session's)."""
    busy = total = steal = None
    try:
        fields = (PROC / "stat").read_text().splitlines()[0].split()[1:]
        ticks = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
        hz = os.sysconf("SC_CLK_TCK")
        user, nice, system, idle, iowait, irq, softirq, steal_ticks = ticks
        busy = (user + nice + system + irq + softirq) / hz
        total = sum(ticks) / hz
        steal = steal_ticks / hz
    except (OSError, ValueError, IndexError):
        pass
    return Snapshot(time.monotonic(), busy, total, steal, (own or _session_cpu_s)())


def while_waiting(seconds: float) -> BackgroundLoad:
    """Other processes' load over ``seconds`` while this process sleeps, read here before a study
    starts any engine: only this process's CPU time counts as ours (the caller's session, e.g. a
    shell that runs a build in the background, is other work here)."""
    before = snapshot(own=_process_cpu_s)
    time.sleep(seconds)
    return between(before, snapshot(own=_process_cpu_s))


def _process_cpu_s() -> float:
    """CPU seconds of this process and its reaped children."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _session_cpu_s() -> float | None:
    """CPU seconds (user + system, with reaped children's) of every process in our session, or None
    without /proc."""
    try:
        session = os.getsid(0)
        hz = os.sysconf("SC_CLK_TCK")
        pids = [entry.name for entry in PROC.iterdir() if entry.name.isdigit()]
    except (OSError, AttributeError, ValueError):
        return None
    seconds = 0.0
    for pid in pids:
        try:
            stat = (PROC / pid / "stat").read_text()
        except OSError:
            continue  # the process ended meanwhile
        after_name = stat[stat.rfind(")") + 2:].split()  # fields from 3 (state) on
        if int(after_name[3]) == session:  # field 6: session id
            # fields 14-17: utime, stime, and cutime, cstime (reaped children: a helper process that
            # ended during the pass moves its time there instead of vanishing from "ours")
            seconds += sum(int(v) for v in after_name[11:15]) / hz
    return seconds


def between(before: Snapshot, after: Snapshot) -> BackgroundLoad:
    """The background load over the interval between two snapshots."""
    wall = after.monotonic_s - before.monotonic_s
    other = steal = None
    if None not in (before.busy_s, after.busy_s, before.own_s, after.own_s) and wall > 0:
        other = max(0.0, ((after.busy_s - before.busy_s) - (after.own_s - before.own_s)) / wall)
    if None not in (before.total_s, after.total_s, before.steal_s, after.steal_s):
        elapsed_cpu = after.total_s - before.total_s
        steal = (after.steal_s - before.steal_s) / elapsed_cpu if elapsed_cpu > 0 else 0.0
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        load = None
    clock, utilization = _gpu_reading()
    return BackgroundLoad(other, steal, load, os.cpu_count() or 1, clock, utilization)


_nvml_handle: Any = None
_nvml_tried = False


def _gpu_reading() -> tuple[int | None, int | None]:
    """SM clock and utilisation of GPU 0 through NVML, (None, None) without one."""
    global _nvml_handle, _nvml_tried
    if not _nvml_tried:
        _nvml_tried = True
        try:
            import pynvml

            pynvml.nvmlInit()
            _nvml_handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # noqa: BLE001 - no driver, no GPU, no package: nothing to read
            _nvml_handle = None
    if _nvml_handle is None:
        return None, None
    try:
        import pynvml

        clock = pynvml.nvmlDeviceGetClockInfo(_nvml_handle, pynvml.NVML_CLOCK_SM)
        utilization = pynvml.nvmlDeviceGetUtilizationRates(_nvml_handle).gpu
        return int(clock), int(utilization)
    except Exception:  # noqa: BLE001 - a reading that fails is left out
        return None, None


def summarize(loads: list[BackgroundLoad]) -> dict[str, Any]:
    """The loads of a configuration's passes in a few numbers (stored with its figures)."""
    def values(name: str) -> list[float]:
        return [getattr(load, name) for load in loads if getattr(load, name) is not None]

    other, steal, load_avg = values("other_cpu_cores"), values("steal_fraction"), values("load_avg_1m")
    clocks = values("gpu_sm_clock_mhz")
    return {
        "passes": len(loads),
        "disturbed_passes": sum(load.disturbed for load in loads),
        "other_cpu_cores_mean": sum(other) / len(other) if other else None,
        "other_cpu_cores_max": max(other) if other else None,
        "steal_fraction_max": max(steal) if steal else None,
        "load_avg_1m_max": max(load_avg) if load_avg else None,
        "gpu_sm_clock_mhz_min": min(clocks) if clocks else None,
        "gpu_sm_clock_mhz_max": max(clocks) if clocks else None,
    }
