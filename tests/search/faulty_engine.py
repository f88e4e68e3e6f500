"""An engine for the fault-matrix tests: the embedded engine, misbehaving on chosen configurations.

The plan is a JSON file named by the environment variable ``FAULTY_ENGINE_PLAN`` (worker processes
inherit the environment, so in-process studies and ``autotune tune`` subprocesses both see it):
``{"log_dir": DIR, "faults": {"ngram@1 c2": ["exit", null, ...], ...}}``. Keys are trial labels
(``none c1``, ``ngram@2 c2``). The k-th ``measure`` call of a label, over every worker process,
behaves as entry k of its list (``null`` or past the end: measures normally):

* ``exit``      ``os._exit(3)`` after a line on stderr (a native library aborting);
* ``segfault``  a real segmentation fault (reads address 0);
* ``hang``      sleeps far past any trial timeout;
* ``oom``       caps the address space (RLIMIT_AS) just above what the process uses, then asks torch
                for more;
* ``hold``      writes ``DIR/holding`` with this process's pid, then sleeps: a test kills the tuner there.

Every call appends a line to ``DIR/<label>.calls`` first (the attempt counter, and a record of what
ran). ``install()`` points the embedded engine's factory at this one; it must run before the tuner
builds its plan.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
import time
from pathlib import Path

import pytest
import torch

from autotune.engines import noise
from autotune.engines.embedded.engine import EmbeddedEngine

PLAN_ENV = "FAULTY_ENGINE_PLAN"
FACTORY = "faulty_engine:FaultyEngine"
HEADROOM_BYTES = 64 << 20  # what the capped process may still map: enough to report, not to allocate
HUGE_BYTES = 8 << 30


def install(monkeypatch) -> None:  # noqa: ANN001 - pytest's MonkeyPatch
    """Have the tuner's workers build this engine instead of the embedded one, and the tuner measure
    each trial's pass once (:func:`parent_readings`)."""
    monkeypatch.setattr("autotune.engines.embedded.adapter.FACTORY", FACTORY)
    for module, name, value in parent_readings():
        monkeypatch.setattr(module, name, value)


def parent_readings() -> list[tuple[object, str, object]]:
    """(module, name, value): the tuner's own reasons to measure a pass again, turned off, as the
    engine turns off the load it reads in the worker (:class:`FaultyEngine`): a load read before the
    study (it limits the threads, and the first quiet pass is measured again on every core), and a
    pass far below its prediction. Either shifts the k-th call of a label the fault plans count on:
    CI measured a retried tiny pass (6 ms of steady window) once more for its surprise."""
    from autotune.search import screening  # here: the engine's worker processes import this module too

    return [(noise, "while_waiting", lambda _seconds: QUIET), (screening, "surprise_floor", lambda _prediction: None)]


@pytest.fixture
def faults(monkeypatch, tmp_path):  # noqa: ANN001 - pytest's fixtures
    """Installs this engine; ``faults({label: [fault, ...]})`` writes its plan and returns the log dir."""
    install(monkeypatch)

    def plan(by_label: dict[str, list[str | None]]) -> Path:
        path = write_plan(tmp_path / "faults.json", tmp_path / "engine-log", by_label)
        monkeypatch.setenv(PLAN_ENV, str(path))
        return tmp_path / "engine-log"

    return plan


def write_plan(path: Path, log_dir: Path, faults: dict[str, list[str | None]]) -> Path:
    """Write a plan file; returns its path (set it as ``FAULTY_ENGINE_PLAN``)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"log_dir": str(log_dir), "faults": faults}))
    return path


def calls(log_dir: Path, label: str) -> int:
    """How many times ``label`` was measured (started), over every worker."""
    path = log_dir / f"{label}.calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


QUIET = noise.BackgroundLoad(other_cpu_cores=0.0, steal_fraction=0.0, load_avg_1m=0.0, cpu_count=2)


class FaultyEngine(EmbeddedEngine):
    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 - EmbeddedEngine's
        super().__init__(*args, **kwargs)
        # In the worker only: a busy test machine must not re-measure disturbed passes, which would
        # shift the k-th call of a label the fault plans count on (the noise has tests of its own).
        noise.between = lambda _before, _after: QUIET

    def measure(self, workload, concurrency, temperature=None, seed=0):  # noqa: ANN001 - the Engine protocol
        plan = json.loads(Path(os.environ[PLAN_ENV]).read_text())
        log_dir = Path(plan["log_dir"])
        method, depth = self.config.method, self.config.depth
        label = f"{method if method == 'none' else f'{method}@{depth}'} c{concurrency}"
        log = log_dir / f"{label}.calls"
        attempt = calls(log_dir, label)
        with log.open("a") as handle:
            handle.write(f"{os.getpid()}\n")
        faults = plan["faults"].get(label, [])
        fault = faults[attempt] if attempt < len(faults) else None
        if fault is not None:
            _misbehave(fault, log_dir)
        return super().measure(workload, concurrency, temperature, seed)


def _misbehave(fault: str, log_dir: Path) -> None:
    if fault == "exit":
        print("native library aborted", file=sys.stderr, flush=True)
        os._exit(3)
    if fault == "segfault":
        ctypes.string_at(0)
    if fault == "hang":
        time.sleep(3600)
    if fault == "oom":
        used = _mapped_bytes()
        resource.setrlimit(resource.RLIMIT_AS, (used + HEADROOM_BYTES, resource.getrlimit(resource.RLIMIT_AS)[1]))
        torch.empty(HUGE_BYTES, dtype=torch.uint8)
    if fault == "hold":
        (log_dir / "holding.partial").write_text(str(os.getpid()))
        (log_dir / "holding.partial").replace(log_dir / "holding")
        time.sleep(3600)
    raise AssertionError(f"unknown fault {fault!r}")


def _mapped_bytes() -> int:
    """The process's virtual size (what RLIMIT_AS caps)."""
    return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[20])
