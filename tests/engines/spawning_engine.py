"""An engine factory for the worker tests: like vLLM (whose engine core is a process of its own) or
TensorRT-LLM (MPI ranks), its ``load`` starts a ``multiprocessing`` child (spawn context), which
starts a grandchild with ``subprocess``; both only sleep. Their pids go to ``pid_dir`` (``child``
and ``grandchild``), so that tests can check that none outlives the worker.

A workload named ``hang`` makes ``measure`` sleep (a long engine call); ``pid_dir/worker`` then
holds the worker child's pid and ``pid_dir/busy`` marks that the call has started.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import time
from pathlib import Path

from autotune.engines.embedded.engine import EmbeddedEngine


def _helper(pid_dir: str) -> None:
    """The engine's own process: start a grandchild, then wait."""
    grandchild = subprocess.Popen(["sleep", "3600"])
    _write(Path(pid_dir) / "grandchild", grandchild.pid)
    time.sleep(3600)


def _write(path: Path, value: int) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(str(value))
    partial.replace(path)  # readers never see a half-written pid


class SpawningEngine(EmbeddedEngine):
    def __init__(self, pid_dir: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.pid_dir = Path(pid_dir)
        self.helper: multiprocessing.process.BaseProcess | None = None

    def load(self, config) -> None:
        super().load(config)
        if self.helper is None:
            self.helper = multiprocessing.get_context("spawn").Process(target=_helper, args=(str(self.pid_dir),))
            self.helper.start()  # "daemonic processes are not allowed to have children" in a daemonic worker
            _write(self.pid_dir / "child", self.helper.pid)
            deadline = time.monotonic() + 30
            while not (self.pid_dir / "grandchild").exists() and time.monotonic() < deadline:
                time.sleep(0.05)

    def measure(self, workload, concurrency, temperature=None, seed=0):
        if workload.name == "hang":
            _write(self.pid_dir / "worker", os.getpid())
            (self.pid_dir / "busy").touch()
            time.sleep(3600)
        return super().measure(workload, concurrency, temperature, seed)
