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

from autotune.analysis.steady import stream_length
from autotune.engines import noise
from autotune.engines.base import EngineConfig
from autotune.engines.embedded.builtin import save_model
from autotune.engines.embedded.engine import EmbeddedEngine
from autotune.engines.embedded.network import CausalLM, ModelConfig
from autotune.engines.protocol import ProtocolOptions
from autotune.engines.worker import EngineSpec, EngineWorker, WorkerFailure, workload_from_data, workload_to_data
from autotune.errors import EngineError
from autotune.workload import Request, Workload

BUSY = noise.BackgroundLoad(other_cpu_cores=1.8, steal_fraction=0.0, load_avg_1m=5.8, cpu_count=2)
TARGET = ModelConfig(vocab_size=259, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=64, n_mtp=0)
WORKLOAD = Workload("tiny", [Request("def f(x):", 4), Request("import os", 3)])


def stream_tokens(concurrency: int) -> int:
    """The tokens a run of WORKLOAD at ``concurrency`` decodes: its 7 per cycle, over the steady
    harness's whole cycles."""
    return 7 * stream_length(len(WORKLOAD.requests), concurrency) // len(WORKLOAD.requests)


class FaultyEngine(EmbeddedEngine):
    """The embedded engine, failing on purpose when the workload is named after a fault."""

    def __init__(self, pid_file: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.pid_file = pid_file

    def measure(self, workload, concurrency, temperature=None, seed=0):
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
        if workload.name == "enomem":  # torch's CPU allocator under an address-space limit
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory")
        if workload.name == "bug":
            raise KeyError("missing")
        if workload.name == "busy":  # from now on, this worker's passes see other processes using 1.8 of 2 cores
            noise.between = lambda _before, _after: BUSY
        return super().measure(workload, concurrency, temperature, seed)


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
    assert (first.concurrency, second.concurrency) == (1, 2)
    assert second.output_tokens == stream_tokens(2)
    assert (worker.starts, worker.loads) == (1, 1)
    worker.measure(EngineConfig("ngram", 2), WORKLOAD, 2)
    assert (worker.starts, worker.loads) == (2, 2)  # a new configuration: a fresh process, the model reloaded


class KeepingEngine(FaultyEngine):
    """An engine that manages its engines, as the vLLM and TensorRT-LLM runners do."""

    manages_engines = True


def test_an_engine_that_manages_its_engines_keeps_one_child_across_configurations_and_runs(target_file) -> None:
    """Screening of two configurations, then a protocol run per concurrency: one
    child and one model load throughout (n-gram loads no model); a failure still replaces the child."""
    options = ProtocolOptions(min_repetitions=1, max_repetitions=1)
    with EngineWorker(EngineSpec(f"{KeepingEngine.__module__}:KeepingEngine", {"target": target_file}), 30) as worker:
        worker.measure(EngineConfig("none"), WORKLOAD, 1)
        worker.measure(EngineConfig("ngram", 2), WORKLOAD, 2)
        for concurrency in (1, 2):  # the baseline alone: no speedup whose plausibility a busy machine could spoil
            worker.measure_repeatedly([], WORKLOAD, concurrency, options=options)
        worker.measure(EngineConfig("none"), WORKLOAD, 1)
        assert (worker.starts, worker.loads) == (1, 1) and worker.shares_child
        with pytest.raises(WorkerFailure, match="crash"):
            worker.measure(EngineConfig("none"), Workload("crash", WORKLOAD.requests), 1)
        worker.measure(EngineConfig("none"), WORKLOAD, 1)
        assert (worker.starts, worker.loads) == (2, 2)


class HintedEngine(KeepingEngine):
    """Writes every keep() hint it gets to ``pid_file`` (one line of labels per hint)."""

    def keep(self, configs) -> None:
        with open(self.pid_file, "a") as hints:
            hints.write(" ".join(config.label() for config in configs) + "\n")


def test_keep_hints_reach_a_child_that_manages_its_engines_and_no_other(target_file, tmp_path) -> None:
    hints = tmp_path / "hints"
    spec = EngineSpec(f"{HintedEngine.__module__}:HintedEngine", {"target": target_file, "pid_file": str(hints)})
    with EngineWorker(spec, 30) as worker:
        worker.keep([EngineConfig("ngram", 2)])  # no child yet: nothing is loaded that a hint could spare
        assert worker.starts == 0
        worker.measure(EngineConfig("none"), WORKLOAD, 1)
        worker.keep([EngineConfig("none"), EngineConfig("ngram", 2)])
        assert hints.read_text() == "none ngram@2\n" and (worker.starts, worker.loads) == (1, 1)
    plain = EngineSpec(f"{FaultyEngine.__module__}:FaultyEngine", {"target": target_file})
    with EngineWorker(plain, 30) as worker:
        worker.measure(EngineConfig("none"), WORKLOAD, 1)
        worker.keep([EngineConfig("none")])  # a fresh process per configuration: no hint to send
        assert worker.starts == 1


@pytest.mark.parametrize(
    ("fault", "kind", "reason"),
    [
        ("crash", "crash", "exited with code 3; last output: native library aborted"),
        ("segfault", "crash", "signal SIGSEGV"),
        ("killed", "oom", "SIGKILL"),
        ("oom", "oom", "MemoryError: cannot allocate 8 GiB"),
        ("enomem", "oom", "RuntimeError: [enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate"),
        ("bug", "crash", "KeyError: 'missing' (at test_worker.py:"),
    ],
)
@pytest.mark.slow  # a worker process per case, some waited out to a timeout
def test_failures_are_typed_and_the_next_call_works(worker, fault, kind, reason) -> None:
    with pytest.raises(WorkerFailure) as failure:
        worker.measure(EngineConfig("none"), Workload(fault, WORKLOAD.requests), 1)
    assert failure.value.kind == kind
    assert reason in failure.value.reason
    assert isinstance(failure.value, EngineError)
    assert not worker.alive
    assert worker.measure(EngineConfig("none"), WORKLOAD, 1).output_tokens == stream_tokens(1)
    assert worker.starts == 2


@pytest.mark.slow  # a worker process per case, some waited out to a timeout
def test_a_hanging_call_is_killed_at_the_timeout(worker) -> None:
    worker.measure(EngineConfig("none"), WORKLOAD, 1)  # started with a generous timeout
    worker.timeout_s = 1.5
    process = worker._process
    with pytest.raises(WorkerFailure, match="timeout: no answer within 1.5 s") as failure:
        worker.measure(EngineConfig("none"), Workload("hang", WORKLOAD.requests), 1)
    assert failure.value.kind == "timeout"
    assert not process.is_alive()


@pytest.mark.slow  # a worker process per case, some waited out to a timeout
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


def test_a_pass_comes_back_with_its_background_load(worker) -> None:
    assert worker.measure_pass(EngineConfig("none"), WORKLOAD, 1).load.cpu_count >= 1  # read in the worker
    busy = worker.measure_pass(EngineConfig("none"), Workload("busy", WORKLOAD.requests), 1)
    assert busy.load.disturbed and busy.load.describe() == "other processes use 1.80 of 2 cores"


def test_a_thread_limit_starts_a_child_that_computes_on_that_many_threads(worker) -> None:
    worker.measure(EngineConfig("none"), WORKLOAD, 1)
    default = worker.child_threads
    assert default == torch.get_num_threads()  # a fresh interpreter's torch: what this one has
    worker.limit_threads(1)
    assert not worker.alive  # the next call starts a child with the limit
    worker.measure(EngineConfig("none"), WORKLOAD, 1)
    assert (worker.child_threads, worker.starts) == (1, 2)
    worker.limit_threads(1)  # unchanged: the child stays
    assert worker.alive
    worker.limit_threads(None)
    worker.measure(EngineConfig("none"), WORKLOAD, 1)
    assert (worker.child_threads, worker.starts) == (default, 3)


def test_discarded_rounds_are_said_while_the_protocol_runs(worker) -> None:
    """The notice crosses from the worker before the answer: here the only one, as the time budget
    (0 s left) ends the run after a first, disturbed round."""
    said: list[str] = []
    with pytest.raises(WorkerFailure, match="time budget ran out before a round could be kept"):
        worker.measure_repeatedly([EngineConfig("ngram", 2)], Workload("busy", WORKLOAD.requests), 1,
                                  options=ProtocolOptions(budget_s=0.0), notice=said.append)
    assert said == ["round 1 at concurrency 1: none pass disturbed (other processes use 1.80 of 2 cores): re-measuring"]


def test_measurements_come_back_with_their_outputs(worker) -> None:
    measurement = worker.measure(EngineConfig("none"), WORKLOAD, 2)
    assert [len(tokens) for tokens in measurement.outputs] == [4, 3] * 4  # the stream: 4 requests per slot


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


# -- engines that start processes of their own (vLLM's engine core, TensorRT-LLM's MPI ranks) --------

SPAWNING_FACTORY = "spawning_engine:SpawningEngine"  # tests/engines is on sys.path, as for FaultyEngine


def _spawning_worker(target_file: str, pid_dir: Path, timeout_s: float = 60) -> EngineWorker:
    return EngineWorker(EngineSpec(SPAWNING_FACTORY, {"target": target_file, "pid_dir": str(pid_dir)}), timeout_s)


def _wait_for_pid(path: Path, timeout_s: float = 30) -> int:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"no {path.name} pid within {timeout_s:g} s"
        time.sleep(0.05)
    return int(path.read_text())


def _all_gone(pids: list[int], timeout_s: float = 5) -> bool:
    deadline = time.monotonic() + timeout_s
    while any(_running(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.slow  # a worker process per case, some waited out to a timeout
def test_an_engine_may_start_processes_of_its_own(target_file, tmp_path) -> None:
    with _spawning_worker(target_file, tmp_path) as worker:
        assert worker.measure(EngineConfig("none"), WORKLOAD, 1).output_tokens == stream_tokens(1)
        assert not worker._process.daemon
        pids = [_wait_for_pid(tmp_path / "child"), _wait_for_pid(tmp_path / "grandchild")]
        assert all(_running(pid) for pid in pids)
        started = time.monotonic()
        worker.stop()
        assert time.monotonic() - started < 4  # the engine's own child does not hold up the worker's exit
    assert _all_gone(pids)


@pytest.mark.slow  # a worker process per case, some waited out to a timeout
def test_a_timeout_kills_the_engines_processes_too(target_file, tmp_path) -> None:
    with _spawning_worker(target_file, tmp_path) as worker:
        worker.measure(EngineConfig("none"), WORKLOAD, 1)
        pids = [_wait_for_pid(tmp_path / "child"), _wait_for_pid(tmp_path / "grandchild"), worker._process.pid]
        worker.timeout_s = 1.5
        with pytest.raises(WorkerFailure) as failure:
            worker.measure(EngineConfig("none"), Workload("hang", WORKLOAD.requests), 1)
        assert failure.value.kind == "timeout"
        assert _all_gone(pids)


def _parent_script(workload: str) -> str:
    """A parent process measuring the spawning engine on ``workload`` ("hang": for an hour)."""
    return (
        "import sys\n"
        "from autotune.engines.base import EngineConfig\n"
        "from autotune.engines.worker import EngineSpec, EngineWorker\n"
        "from autotune.workload import Request, Workload\n"
        "target, pid_dir = sys.argv[1:]\n"
        f"worker = EngineWorker(EngineSpec({SPAWNING_FACTORY!r}, {{'target': target, 'pid_dir': pid_dir}}), 60)\n"
        f"worker.measure(EngineConfig('none'), Workload({workload!r}, [Request('x', 1)]), 1)\n"
    )


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}


@pytest.mark.slow  # a worker process per case, some waited out to a timeout
def test_a_parent_killed_by_sigkill_leaves_no_worker_behind(target_file, tmp_path) -> None:
    script = _parent_script("hang")  # busy for an hour
    parent = subprocess.Popen([sys.executable, "-c", script, target_file, str(tmp_path)], env=_environment())
    try:
        worker_pid = _wait_for_pid(tmp_path / "worker", timeout_s=60)
        pids = [worker_pid, _wait_for_pid(tmp_path / "child"), _wait_for_pid(tmp_path / "grandchild")]
        assert all(_running(pid) for pid in pids)
        parent.kill()  # SIGKILL: no stop(), no atexit, no finally
        parent.wait()
        assert _all_gone(pids, timeout_s=5)
    finally:
        parent.kill()
        parent.wait()


@pytest.mark.slow  # a worker process per case, some waited out to a timeout
@pytest.mark.parametrize("ending", ["", "del worker\n"])  # the worker kept, or dropped unstopped
def test_interpreter_exit_without_stop_does_not_wait_for_the_worker(target_file, tmp_path, ending) -> None:
    script = _parent_script("tiny") + "print(worker._process.pid, flush=True)\n" + ending  # no worker.stop()
    done = subprocess.run([sys.executable, "-c", script, target_file, str(tmp_path)], env=_environment(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pids = [int(done.stdout.split()[-1]), _wait_for_pid(tmp_path / "child"), _wait_for_pid(tmp_path / "grandchild")]
    assert _all_gone(pids)
