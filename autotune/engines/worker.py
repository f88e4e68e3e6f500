"""Process isolation for engines: run an engine in a child process that may crash, hang or run out
of memory without taking the caller down.

The parent (:class:`EngineWorker`) starts a child with the multiprocessing ``spawn`` context (a
fork after torch has started threads can deadlock), which builds the engine from an importable
factory (``"package.module:callable"`` plus keyword arguments, see :class:`EngineSpec`). Requests
and answers are plain data over a pipe: the configuration and the workload go down as dicts, the
:class:`~autotune.engines.base.Measurement` comes back as a dict.

Every call has a timeout. What goes wrong comes back as :class:`WorkerFailure` with a ``kind``:

* ``timeout``     no answer in time: the child is killed;
* ``oom``         MemoryError or torch's OutOfMemoryError in the child, an error whose text says an
                  allocation failed (:func:`autotune.engines.failures.classify`), or the child
                  killed by SIGKILL (what the kernel's out-of-memory killer sends);
* ``crash``       the child died otherwise (segfault, exit), or raised an unexpected exception;
* ``unsupported`` the engine cannot run this configuration (UnsupportedConfigError);
* ``engine_error`` any other AutotuneError of the engine (bad model file, ...).

After a failure the child is discarded; the next call starts a fresh one. How long a healthy child
lives depends on its engine:

* an engine that *manages its engines* (``manages_engines = True``: the vLLM and TensorRT-LLM
  runners) keeps the child across configurations, protocol runs and timing runs, and decides
  itself which engines it keeps (vLLM on a CPU up to ``KEPT_CPU_ENGINES``, one at a time on a GPU):
  one build per (method, draft, depth) serves every concurrency of a study, in screening and
  confirmation alike, where a fresh process paid minutes of GPU build each time. After a timing run
  the child is kept only when the engine says its timing leaves nothing forced loaded
  (``timing_leaves_engines_reusable``: both runners keep only the baseline, which nothing forces);
* any other engine (the embedded one) gets a fresh child whenever the configuration or the thread
  count (:meth:`EngineWorker.limit_threads`) changes, and one per protocol and timing run, stopped
  afterwards: its CPU memory figure is the rise of the process's peak resident set, which a
  process that ran other configurations would hide, and its models load in seconds.

The child logs its output to a file whose tail explains a crash, and ignores SIGINT: Ctrl-C
reaches the parent, which stops the child.

The child leads its own session (``os.setsid``), so that stopping it kills its whole process group:
an engine that starts processes of its own (TensorRT-LLM's MPI ranks, tokenizer pools) leaves no
orphan holding the GPU behind a timed-out or crashed trial.

The child is *not* a daemonic multiprocessing process: engines start processes of their own (vLLM
its engine core, TensorRT-LLM its MPI ranks), which a daemonic child may not. The guarantees of the
daemon flag are kept otherwise, so that the child never outlives the parent:

* the parent stops it on :meth:`EngineWorker.stop`, on leaving the ``with`` block and after a
  failure; an ``atexit`` hook stops every child still running when the interpreter exits without
  ``stop()`` (multiprocessing would otherwise wait for the non-daemonic child at exit);
* if the parent dies abruptly (SIGKILL), an idle child gets EOF on its pipe and exits; a child busy
  in a long engine call is killed by the kernel, as it asks with ``prctl(PR_SET_PDEATHSIG,
  SIGKILL)`` on Linux (checking the parent pid right after, since the parent may have died
  before). The signal comes when the *thread* that started the child ends, so start workers from
  a thread that lives as long as they do (autotune starts them from the main thread);
* on POSIX the child starts a tiny reaper process in its process group that SIGKILLs the group
  once the child is gone however it ended, even when the parent could not kill the group.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib
import multiprocessing
import multiprocessing.util  # its exit hook (joining non-daemonic children) must run after ours
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from autotune.engines.base import EngineConfig, Measurement
from autotune.engines.failures import classify
from autotune.engines.noise import BackgroundLoad
from autotune.engines.protocol import Pass, ProtocolOptions, ProtocolResult, measure_pass, measure_repeatedly
from autotune.engines.base import RunShape
from autotune.errors import EngineError, UnsupportedConfigError
from autotune.workload import Request, Workload

FAILURE_KINDS = ("timeout", "oom", "crash", "unsupported", "engine_error")
POLL_INTERVAL_S = 0.1
STOP_GRACE_S = 5.0
LOG_TAIL_LINES = 5
REAPER_POLL_S = 0.2
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


class WorkerFailure(EngineError):
    """An engine call failed in the worker process; ``kind`` is one of FAILURE_KINDS."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(f"{kind}: {reason}")
        self.kind = kind
        self.reason = reason


@dataclass(frozen=True)
class EngineSpec:
    """How the child builds its engine: ``factory`` is ``"module:callable"``, called with ``kwargs``."""

    factory: str
    kwargs: dict[str, Any] = field(default_factory=dict)


def workload_to_data(workload: Workload) -> dict[str, Any]:
    """The workload as plain data (what crosses the process boundary)."""
    return {
        "name": workload.name,
        "version": workload.version,
        "requests": [[r.prompt, r.max_tokens, r.temperature, r.category] for r in workload.requests],
    }


def workload_from_data(data: dict[str, Any]) -> Workload:
    return Workload(data["name"], tuple(Request(*fields) for fields in data["requests"]), data["version"])


class EngineWorker:
    """Parent side: runs ``measure`` calls in a child process (see the module docstring).

    ``loads`` counts model loads over every child; ``starts`` counts children started.
    ``shares_child``: the running child's engine manages its engines (see the module doc), so the
    child is kept across configurations and runs; False while no child runs.
    """

    def __init__(self, spec: EngineSpec, timeout_s: float | None = None) -> None:
        self.spec = spec
        self.timeout_s = timeout_s
        self.starts = 0
        self.loads = 0
        self._context = multiprocessing.get_context("spawn")
        self._process: multiprocessing.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self._log_path: Path | None = None
        self._config: EngineConfig | None = None
        self._child_loads = 0  # loads reported by the current child
        self.shares_child = False
        self.threads: int | None = None  # see limit_threads
        self.child_threads: int | None = None  # the threads the last child's engine computes on, where it says

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def measure(
        self, config: EngineConfig, workload: Workload, concurrency: int, temperature: float | None = None, seed: int = 0
    ) -> Measurement:
        """Measure ``workload`` with ``config`` at ``concurrency``, reusing the child when it runs ``config``
        or manages its engines (see the module doc)."""
        return self.measure_pass(config, workload, concurrency, temperature, seed).measurement

    def measure_pass(
        self, config: EngineConfig, workload: Workload, concurrency: int, temperature: float | None = None, seed: int = 0
    ) -> Pass:
        """:meth:`measure`, with the machine's background load during the pass (read in the child,
        whose session holds the engine's processes, so only other work counts as disturbance)."""
        if not self.alive or (config != self._config and not self.shares_child):
            self.stop()
            self._start()
        if config != self._config:
            self._loaded(self._call("load", asdict(config)))
            self._config = config
        reply = self._call("measure", workload_to_data(workload), concurrency, temperature, seed)
        self._loaded(reply)
        return Pass(Measurement.from_dict(reply["measurement"]), BackgroundLoad.from_dict(reply["load"]))

    def measure_repeatedly(
        self, configs: list[EngineConfig], workload: Workload, concurrency: int, temperature: float | None = None,
        seed: int = 0, options: ProtocolOptions | None = None, notice: Callable[[str], None] | None = None,
    ) -> ProtocolResult:
        """Run the measurement protocol (:func:`autotune.engines.protocol.measure_repeatedly`, the
        baseline included) for ``configs`` at ``concurrency`` in one child, where they alternate
        round by round: the running child when its engine manages its engines (the engines it
        built for earlier calls serve this one), else a fresh child stopped afterwards. ``notice``
        gets each discarded round's line while the protocol runs (a loaded machine makes it slow:
        say why)."""
        options = options or ProtocolOptions()
        reply = self._in_child("protocol", [asdict(c) for c in configs], workload_to_data(workload), concurrency,
                               temperature, seed, options.to_dict(), notice=notice)
        return ProtocolResult.from_dict(reply["result"])

    def keep(self, configs: Iterable[EngineConfig]) -> None:
        """Tell a child whose engine manages its engines which configurations come next, so that it
        shuts others down first when it must make room (the vLLM runner's ``keep``). Without such a
        child nothing is loaded that a hint could spare: nothing is sent."""
        if self.alive and self.shares_child:
            self._loaded(self._call("keep", [asdict(c) for c in configs]))

    def time_steps(self, configs: list[EngineConfig], workload: Workload, concurrencies: list[int],
                   **options: int) -> list[dict[str, Any]]:
        """Step-cost timing runs (an engine with ``time_steps``, see
        :mod:`autotune.engines.embedded.timing`), in a child as :meth:`measure_repeatedly` runs its
        protocol; an engine without them fails with kind ``unsupported``."""
        reply = self._in_child("timing", [asdict(c) for c in configs], workload_to_data(workload),
                               list(concurrencies), options)
        if not reply["reusable"]:
            self.stop()  # engines built for forced acceptance must not serve a measurement
        return reply["points"]

    def limit_threads(self, threads: int | None) -> None:
        """Have the children's engine compute on ``threads`` threads (None: its default), from the
        next child on: a child of its own per configuration is stopped so that the next call starts
        one with the new count. An engine with ``set_threads`` (the embedded one) honours it; the
        runners that manage their engines keep their child and their builds' threads."""
        if threads != self.threads:
            self.threads = threads
            if not self.shares_child:
                self.stop()

    def stop(self, force: bool = False) -> None:
        """Stop the child (asked to close, killed if it does not within a few seconds, or at once
        with ``force``); the models it loaded are gone."""
        process, conn = self._process, self._conn
        self._process = self._conn = None
        self._config = None
        self._child_loads = 0
        self.shares_child = False
        if process is not None:
            _LIVE_CHILDREN.pop(process, None)
            if not force:
                try:
                    conn.send(("close",))
                except (OSError, ValueError):
                    pass
                process.join(STOP_GRACE_S)
            _kill_group(process)  # the child if it did not close in time, and whatever it started
            process.join()
            conn.close()
        if self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None

    close = stop

    def __enter__(self) -> EngineWorker:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_exc: object) -> None:
        self.stop(force=exc_type is not None)

    # -- internals --------------------------------------------------------------------------------

    def _start(self) -> None:
        handle, log = tempfile.mkstemp(prefix="autotune-worker-", suffix=".log")
        os.close(handle)
        self._log_path = Path(log)
        parent_conn, child_conn = self._context.Pipe()
        process = self._context.Process(
            target=_serve, args=(child_conn, self.spec.factory, self.spec.kwargs, log, os.getpid(), self.threads),
            daemon=False,  # engines start processes of their own (see the module docstring)
            name="autotune-engine-worker",
        )
        process.start()
        child_conn.close()  # the parent must not hold the child's end, or a dead child gives no EOF
        self._process, self._conn = process, parent_conn
        _LIVE_CHILDREN[process] = self._log_path
        self.starts += 1
        ready = self._wait_reply()  # the child's "ready" (or why it could not build the engine)
        self._loaded(ready)
        self.shares_child = ready["manages_engines"]
        self.child_threads = ready["threads"]

    def _in_child(self, *message: Any, notice: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Send ``message`` (a run that loads configurations of its own) to the child that should
        run it: the running one when it is shared, else a fresh one that is stopped afterwards. The
        child's loaded configuration is unknown afterwards, so the next measure loads its own."""
        if not (self.alive and self.shares_child):
            self.stop()
            self._start()
        try:
            reply = self._call(*message, notice=notice)
            self._loaded(reply)
        finally:
            self._config = None
            if not self.shares_child:
                self.stop()  # the next call starts from a clean process too
        return reply

    def _loaded(self, reply: dict[str, Any]) -> None:
        self.loads += reply["loads"] - self._child_loads
        self._child_loads = reply["loads"]

    def _call(self, *message: Any, notice: Callable[[str], None] | None = None) -> dict[str, Any]:
        try:
            self._conn.send(message)
        except (OSError, ValueError):
            return self._wait_reply()  # the child is gone: report how it ended
        return self._wait_reply(notice)

    def _wait_reply(self, notice: Callable[[str], None] | None = None) -> dict[str, Any]:
        """The child's answer; the ``notice`` lines it sends before it go to ``notice``."""
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        while True:
            while not self._conn.poll(POLL_INTERVAL_S):
                if not self._process.is_alive():
                    break
                if deadline is not None and time.monotonic() > deadline:
                    self._fail("timeout", f"no answer within {self.timeout_s:g} s; the worker was killed")
            try:
                status, payload = self._conn.recv()
            except (EOFError, OSError):
                self._process.join(STOP_GRACE_S)
                self._fail(*self._death_cause())
            if status != "notice":
                break
            if notice is not None:
                notice(payload)
        if status == "ok":
            return payload
        self._fail(*payload)

    def _death_cause(self) -> tuple[str, str]:
        code = self._process.exitcode
        tail = self._log_tail()
        detail = f"; last output: {tail}" if tail else ""
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            if -code == signal.SIGKILL:
                return "oom", f"the worker was killed by SIGKILL (most likely the out-of-memory killer){detail}"
            return "crash", f"the worker died from signal {name}{detail}"
        return "crash", f"the worker exited with code {code}{detail}"

    def _log_tail(self) -> str:
        try:
            lines = self._log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(line.strip() for line in lines[-LOG_TAIL_LINES:])

    def _fail(self, kind: str, reason: str) -> None:
        self.stop(force=kind == "timeout")  # a hung child will not read the request to close
        raise WorkerFailure(kind, reason)


_LIVE_CHILDREN: dict[multiprocessing.process.BaseProcess, Path] = {}  # started, not yet stopped: their logs


@atexit.register
def _stop_live_children() -> None:
    """At interpreter exit, kill every child not stopped (its worker dropped or never stopped);
    registered after multiprocessing's own hook, so it runs first and that hook, which joins
    non-daemonic children, finds none left to wait for."""
    while _LIVE_CHILDREN:
        process, log_path = _LIVE_CHILDREN.popitem()
        _kill_group(process)
        process.join()
        log_path.unlink(missing_ok=True)


# -- child side -------------------------------------------------------------------------------------


def _serve(conn: Connection, factory: str, kwargs: dict[str, Any], log_path: str, parent_pid: int,
           threads: int | None) -> None:
    """Child main loop: build the engine (on ``threads`` threads where it takes a count), then
    answer load/measure requests until told to close."""
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(os, "setsid"):
        os.setsid()  # its own process group: the parent can kill everything it starts
    _redirect_output(log_path)
    _start_reaper()
    try:
        engine = _resolve(factory)(**kwargs)
        if threads is not None and hasattr(engine, "set_threads"):
            engine.set_threads(threads)
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the parent
        conn.send(("failed", classify(exc)))
        return
    conn.send(("ok", {"loads": engine.loads, "manages_engines": bool(getattr(engine, "manages_engines", False)),
                      "threads": getattr(engine, "threads", None)}))
    while True:
        try:
            message = conn.recv()
        except EOFError:  # the parent is gone
            break
        if message[0] == "close":
            break
        try:
            conn.send(("ok", _handle(engine, message, lambda text: conn.send(("notice", text)))))
        except Exception as exc:  # noqa: BLE001 - reported to the parent as a typed failure
            conn.send(("failed", classify(exc)))
    engine.close()
    for child in multiprocessing.active_children():  # left by the engine: do not wait for them at exit
        child.kill()


def _die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this child when the parent dies (Linux), even in a long engine call;
    exit at once if the parent is already gone."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)


_REAPER = (
    "import os, signal, sys, time\n"
    "while os.getppid() == int(sys.argv[1]):\n"
    "    time.sleep(float(sys.argv[2]))\n"
    "os.killpg(0, signal.SIGKILL)\n"
)


def _start_reaper() -> None:
    """Start a process in the child's group that kills the group once the child is gone (the child
    killed with its parent leaves no grandchild behind). POSIX only; best effort."""
    if not hasattr(os, "killpg"):
        return
    global _reaper
    try:
        _reaper = subprocess.Popen([sys.executable, "-I", "-S", "-c", _REAPER, str(os.getpid()), str(REAPER_POLL_S)],
                                   stdin=subprocess.DEVNULL)
    except OSError:
        pass


_reaper: subprocess.Popen | None = None  # the child's reaper (kept referenced: it outlives any call)


def _handle(engine: Any, message: tuple, notice: Callable[[str], None]) -> dict[str, Any]:
    """Answer one request; ``notice`` sends the parent a line while it runs."""
    operation, *args = message
    if operation == "load":
        engine.load(EngineConfig(**args[0]))
        return {"loads": engine.loads}
    if operation == "keep":
        if hasattr(engine, "keep"):
            engine.keep([EngineConfig(**c) for c in args[0]])
        return {"loads": engine.loads}
    if operation == "measure":
        data, concurrency, temperature, seed = args
        one = measure_pass(engine, workload_from_data(data), concurrency, temperature, seed)
        return {"loads": engine.loads, "measurement": one.measurement.to_dict(include_outputs=True),
                "load": one.load.to_dict()}
    if operation == "protocol":
        configs, data, concurrency, temperature, seed, options = args
        result = measure_repeatedly(engine, [EngineConfig(**c) for c in configs],
                                    RunShape(workload_from_data(data), concurrency, temperature, seed),
                                    ProtocolOptions(**options), notice=notice)
        return {"loads": engine.loads, "result": result.to_dict(include_outputs=True)}
    if operation == "timing":
        configs, data, concurrencies, options = args
        if not hasattr(engine, "time_steps"):
            raise UnsupportedConfigError(f"the {engine.name} engine has no step-cost timing runs")
        points = engine.time_steps([EngineConfig(**c) for c in configs], workload_from_data(data), concurrencies, **options)
        return {"loads": engine.loads, "points": points,
                "reusable": bool(getattr(engine, "timing_leaves_engines_reusable", False))}
    raise ValueError(f"unknown worker operation {operation!r}")


def _kill_group(process: multiprocessing.process.BaseProcess) -> None:
    """SIGKILL the child's process group (the child leads it, see ``_serve``), or the child alone
    where there are no process groups; nothing when the group is already gone."""
    if hasattr(os, "killpg") and process.pid is not None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
            return
        except (ProcessLookupError, PermissionError):
            pass
    if process.is_alive():
        process.kill()


def _resolve(factory: str) -> Any:
    module_name, _, attribute = factory.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise EngineError(f"cannot import engine factory {factory!r} ({exc})") from exc
    return target


def _redirect_output(log_path: str) -> None:
    """Send the child's stdout and stderr (C level included) to ``log_path``."""
    descriptor = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    os.close(descriptor)
