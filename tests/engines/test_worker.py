"""The isolated worker: reuse while the configuration stays, restart when it changes, and every way
a child can fail comes back as a typed WorkerFailure (the parent survives and carries on)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from autotune.engines.base import EngineConfig
from autotune.engines.embedded.builtin import save_model
from autotune.engines.embedded.engine import EmbeddedEngine
from autotune.engines.embedded.model import CausalLM, ModelConfig
from autotune.engines.worker import EngineSpec, EngineWorker, WorkerFailure, workload_from_data, workload_to_data
from autotune.errors import EngineError
from autotune.workload import Request, Workload

TARGET = ModelConfig(vocab_size=259, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=64, n_mtp=0)
WORKLOAD = Workload("tiny", [Request("def f(x):", 4), Request("import os", 3)])


class FaultyEngine(EmbeddedEngine):
    """The embedded engine, failing on purpose when the workload is named after a fault."""

    def __init__(self, pid_file: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.pid_file = pid_file

    def measure(self, workload, batch_size, temperature=None, seed=0):
        if workload.name == "spawn-and-hang":  # a process of its own (as an MPI rank), then a hang
            helper = subprocess.Popen(["sleep", "3600"])
            Path(self.pid_file).write_text(str(helper.pid))
            time.sleep(3600)
        if workload.name == "crash":
            print("native library aborted", file=sys.stderr, flush=True)
            os._exit(3)
        if workload.name == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        if workload.name == "killed":
            os.kill(os.getpid(), signal.SIGKILL)
        if workload.name == "hang":
            time.sleep(3600)
        if workload.name == "oom":
            raise MemoryError("cannot allocate 8 GiB")
        if workload.name == "bug":
            raise KeyError("missing")
        return super().measure(workload, batch_size, temperature, seed)


@pytest.fixture(scope="module")
def target_file(tmp_path_factory) -> str:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("worker") / "target.safetensors"
    save_model(CausalLM(TARGET), path)
    return str(path)


@pytest.fixture
def worker(target_file):
    spec = EngineSpec(f"{FaultyEngine.__module__}:FaultyEngine", {"target": target_file})
    with EngineWorker(spec, timeout_s=30) as worker:
        yield worker


def test_workload_crosses_as_plain_data() -> None:
    data = workload_to_data(WORKLOAD)
    assert workload_from_data(data) == WORKLOAD
    assert all(isinstance(fields, list) for fields in data["requests"])


def test_worker_is_reused_while_the_configuration_stays(worker) -> None:
    first = worker.measure(EngineConfig("none"), WORKLOAD, 1)
    second = worker.measure(EngineConfig("none"), WORKLOAD, 2)
    assert (first.batch_size, second.batch_size) == (1, 2)
    assert second.output_tokens == 7
    assert (worker.starts, worker.loads) == (1, 1)
    worker.measure(EngineConfig("ngram", 2), WORKLOAD, 2)
    assert (worker.starts, worker.loads) == (2, 2)  # a new configuration: a fresh process, the model reloaded


@pytest.mark.parametrize(
    ("fault", "kind", "reason"),
    [
        ("crash", "crash", "exited with code 3; last output: native library aborted"),
        ("segfault", "crash", "signal SIGSEGV"),
        ("killed", "oom", "SIGKILL"),
        ("oom", "oom", "MemoryError: cannot allocate 8 GiB"),
        ("bug", "crash", "KeyError: 'missing' (at test_worker.py:"),
    ],
)
def test_failures_are_typed_and_the_next_call_works(worker, fault, kind, reason) -> None:
    with pytest.raises(WorkerFailure) as failure:
        worker.measure(EngineConfig("none"), Workload(fault, WORKLOAD.requests), 1)
    assert failure.value.kind == kind
    assert reason in failure.value.reason
    assert isinstance(failure.value, EngineError)
    assert not worker.alive
    assert worker.measure(EngineConfig("none"), WORKLOAD, 1).output_tokens == 7
    assert worker.starts == 2


def test_a_hanging_call_is_killed_at_the_timeout(worker) -> None:
    worker.measure(EngineConfig("none"), WORKLOAD, 1)  # started with a generous timeout
    worker.timeout_s = 1.5
    process = worker._process
    with pytest.raises(WorkerFailure, match="timeout: no answer within 1.5 s") as failure:
        worker.measure(EngineConfig("none"), Workload("hang", WORKLOAD.requests), 1)
    assert failure.value.kind == "timeout"
    assert not process.is_alive()


def test_stopping_a_worker_kills_the_processes_it_started(target_file, tmp_path) -> None:
    pid_file = tmp_path / "helper.pid"
    spec = EngineSpec(f"{FaultyEngine.__module__}:FaultyEngine", {"target": target_file, "pid_file": str(pid_file)})
    with EngineWorker(spec, timeout_s=30) as worker:
        worker.measure(EngineConfig("none"), WORKLOAD, 1)
        worker.timeout_s = 3
        with pytest.raises(WorkerFailure, match="timeout"):
            worker.measure(EngineConfig("none"), Workload("spawn-and-hang", WORKLOAD.requests), 1)
    helper = int(pid_file.read_text())
    for _ in range(50):  # the helper is the child's child: its own parent is gone, init reaps it
        if not _running(helper):
            break
        time.sleep(0.1)
    assert not _running(helper)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_measurements_come_back_with_their_outputs(worker) -> None:
    measurement = worker.measure(EngineConfig("none"), WORKLOAD, 2)
    assert [len(tokens) for tokens in measurement.outputs] == [4, 3]


def test_unsupported_configurations_are_reported_as_such(worker) -> None:
    with pytest.raises(WorkerFailure) as failure:
        worker.measure(EngineConfig("mtp", 2), WORKLOAD, 1)  # the target has no MTP modules
    assert failure.value.kind == "unsupported"
    assert "MTP modules" in failure.value.reason


def test_a_factory_that_cannot_be_imported_is_an_engine_error() -> None:
    with EngineWorker(EngineSpec("autotune.no_such_module:Engine"), timeout_s=30) as worker:
        with pytest.raises(WorkerFailure) as failure:
            worker.measure(EngineConfig("none"), WORKLOAD, 1)
    assert failure.value.kind == "engine_error"
    assert "cannot import engine factory 'autotune.no_such_module:Engine'" in failure.value.reason
