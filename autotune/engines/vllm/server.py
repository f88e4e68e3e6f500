"""One ``vllm serve`` process on 127.0.0.1, started, watched and always stopped with everything under it:
the servers a study measures through (:class:`~autotune.engines.vllm.runner.VllmRunner`) and the ones
``autotune validate`` compares (the exported scripts).

:class:`Server` starts its command with ``--host 127.0.0.1 --port PORT`` and waits for /health, saying
every :data:`PROGRESS_S` seconds that it is still starting. Once up it knows the processes vLLM
started under it (``VLLM::EngineCore``, ``VLLM::Worker``: vLLM titles them so), makes the engine core
nicer where its launch says so (a server on a CPU, :data:`CPU_ENGINE_CORE_NICE`), and :meth:`Server.check`
raises :class:`ServerDied` the moment the server or one of them is gone, in one line naming the server
and why (:mod:`autotune.engines.vllm.death`: exit status or signal, the kernel's OOM killer, the log's
last lines). :meth:`Server.stop` sends SIGTERM, then SIGKILL to what is left; leaving the ``with``
block stops it whatever happened inside (a load generator failing, Ctrl-C, a timeout).

``own_group``: the server leads a process group of its own, which stopping it signals whole (validate,
whose servers outlive nothing of ours). Otherwise it stays in its starter's group, so that a study's
worker process killed with its group (a trial timeout) takes its servers along, and stopping it
signals the server and the processes under it by pid.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from autotune.engines.vllm.death import exit_cause, log_tail, oom_cause, oom_kills
from autotune.errors import ConfigurationError, EngineError

HOST = "127.0.0.1"
DEFAULT_START_TIMEOUT_S = 600.0  # a tiny model on 2 busy CPU cores takes 30-120 s; a real one minutes
STOP_GRACE_S = 30.0
POLL_S = 0.5
PROGRESS_S = 15.0  # a starting server says so this often
VLLM_TITLE = "VLLM::"  # vLLM's engine-core and worker processes title themselves so (setproctitle)
ENGINE_CORE_TITLE = VLLM_TITLE + "EngineCore"
# How much nicer than the server a CPU server's engine core runs (Launch.engine_core_nice). vLLM's CPU
# backend binds the model's threads to all cores but one, which it leaves to the engine core ("reserve
# ... core for scheduler proc as always use MP executor", "TODO: make scheduler proc sleep when idle":
# vllm/utils/ompmultiprocessing.py, 0.32.0), and the engine core busy-polls the worker's replies with
# sched_yield for a second after each (SpinCondition, vllm/distributed/device_communicators/
# shm_broadcast.py). On a small host that core is also the API server's and the load generator's: at
# the same priority the spinning engine core starved the API server in 32 of 63 two-core validation
# rows at c >= 2 (tokens arriving in bursts, the server near its c = 1 rate), 23 of 126 at +10
# (docs/vllm.md, "The engine core's spin on a small CPU host"). Nicer, it yields that core to them and
# still takes it whenever they wait.
CPU_ENGINE_CORE_NICE = 10


def engine_core_nice(on_cpu: bool) -> int:
    """The ``Launch.engine_core_nice`` of a server on a CPU (``on_cpu``) or on a GPU (left as started)."""
    return CPU_ENGINE_CORE_NICE if on_cpu else 0


class ServerDied(EngineError):
    """A server (or one of vLLM's processes under it) is gone; the message says which and why."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def check_port_free(port: int) -> None:
    """ConfigurationError when something already holds ``port`` on 127.0.0.1: the server would fail
    later, or worse, the load generator would measure the other process."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            raise ConfigurationError(f"port {port} on {HOST} is in use ({exc.strerror}); choose another with "
                                     "--port, or leave it out for a free one") from None


@dataclass(frozen=True)
class Launch:
    """How a server's process is started: ``command`` (``--host``/``--port`` are added) with ``env``,
    in ``cwd`` (None: ours), leading a process group of its own or not (``own_group``, module doc);
    ``engine_core_nice``: how much nicer than it started vLLM's engine core is made once the server is
    up (0: left as started; :data:`CPU_ENGINE_CORE_NICE` for a server on a CPU)."""

    command: Sequence[str]
    env: dict[str, str]
    cwd: Path | None = None
    own_group: bool = True
    engine_core_nice: int = 0


class Server:
    """``launch`` with ``--host 127.0.0.1 --port PORT`` and its output in ``log``, called ``name`` in
    messages (e.g. ``schedule server (draft@2)``); entering starts it (:meth:`start`). ``watch`` is
    called at every poll while it starts (the servers already up, whose death should not wait for
    this start)."""

    def __init__(self, name: str, launch: Launch, port: int, log: Path, *,
                 start_timeout_s: float = DEFAULT_START_TIMEOUT_S, say: Callable[[str], None] | None = None,
                 watch: Callable[[], None] | None = None) -> None:
        self.name, self.port, self.log = name, port, log
        self.launch = launch
        self.start_timeout_s = start_timeout_s
        self.say = say or (lambda _line: None)
        self.watch = watch or (lambda: None)
        self.process: subprocess.Popen | None = None
        self.start_s: float | None = None
        self.members: dict[int, str] = {}  # vLLM's processes under the server, by pid (their titles)
        self._oom_before: int | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Start the command and wait for /health: ServerDied when it exits first, EngineError when
        ``start_timeout_s`` passes first (stopped again either way)."""
        check_port_free(self.port)
        self._oom_before = oom_kills()
        with self.log.open("wb") as log_file:
            self.process = subprocess.Popen(
                [*self.launch.command, "--host", HOST, "--port", str(self.port)], stdout=log_file,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.launch.env, cwd=self.launch.cwd,
                start_new_session=self.launch.own_group)
        try:
            self.start_s = self._wait_for_health()
        except BaseException:
            self.stop()
            raise
        self.members = {pid: title for pid, title in descendants(self.process.pid).items()
                        if title.startswith(VLLM_TITLE)}
        if self.launch.engine_core_nice:
            self._renice_engine_core(self.launch.engine_core_nice)

    def _renice_engine_core(self, increment: int) -> None:
        """Make vLLM's engine core ``increment`` nicer (its main thread, where it polls the worker;
        at most 19, the lowest priority)."""
        for pid, title in self.members.items():
            if title == ENGINE_CORE_TITLE:
                try:
                    os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, pid) + increment))
                except (ProcessLookupError, PermissionError) as exc:
                    self.say(f"{self.name}: its engine core (pid {pid}) kept its priority ({exc.strerror})")

    def get(self, route: str, timeout_s: float = 30.0) -> str:
        """The body of GET ``route`` on this server."""
        with urllib.request.urlopen(f"{self.base_url}{route}", timeout=timeout_s) as response:
            return response.read().decode()

    def check(self) -> None:
        """ServerDied when the server's process has exited or one of vLLM's processes under it is gone."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise ServerDied(self.death(exit_cause(self.process.returncode)))
        for pid, title in self.members.items():
            if not _alive(pid):
                raise ServerDied(self.death(f"its {title} (pid {pid}) is gone"))

    def stop(self) -> None:
        """SIGTERM the server (its group when it has its own), SIGKILL what is left after a grace
        period; idempotent."""
        process = self.process
        if process is None:
            return
        under = list(descendants(process.pid)) if not self.launch.own_group else []
        self._signal(signal.SIGTERM, under)
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        # vLLM's engine core and worker, or a server that ignored SIGTERM.
        self._signal(signal.SIGKILL, under)
        process.wait(timeout=STOP_GRACE_S)
        _wait_gone(process.pid if self.launch.own_group else None, under)

    def death(self, cause: str, when: str = "") -> str:
        """The one line saying this server died of ``cause`` (and of the OOM killer where it acted)."""
        assert self.process is not None
        parts = [cause]
        oom = oom_cause(self._oom_before, [self.process.pid, *self.members])
        if oom is not None:
            parts.append(oom)
        return (f"the {self.name} died{when}: {'; '.join(parts)}; its log ends: {log_tail(self.log)} "
                f"(log: {self.log})")

    def _signal(self, sig: signal.Signals, under: list[int]) -> None:
        assert self.process is not None
        if self.launch.own_group:
            _signal_group(self.process.pid, sig)
            return
        for pid in (self.process.pid, *under):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def _wait_for_health(self) -> float:
        """Seconds until /health answered 200."""
        assert self.process is not None
        start = last_said = time.monotonic()
        while True:
            self.watch()
            if self.process.poll() is not None:
                raise ServerDied(self.death(exit_cause(self.process.returncode), " before /health answered"))
            try:
                self.get("/health", timeout_s=5.0)
                return time.monotonic() - start
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            now = time.monotonic()
            if now - start > self.start_timeout_s:
                raise EngineError(f"the {self.name} did not answer /health within {self.start_timeout_s:g} s "
                                  f"(raise --start-timeout; log: {self.log})")
            if now - last_said >= PROGRESS_S:
                self.say(f"{self.name}: still starting ({now - start:.0f} s)")
                last_said = now
            time.sleep(POLL_S)


def descendants(pid: int) -> dict[int, str]:
    """The processes under ``pid`` (children, their children, ...), by pid, with their titles (the first
    word of their command line)."""
    parents: dict[int, int] = {}
    titles: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            title = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace").strip()
        except OSError:
            continue
        parents[int(entry.name)], titles[int(entry.name)] = int(fields[1]), title
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                found[child] = titles[child]
                frontier.append(child)
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_gone(pgid: int | None, pids: Sequence[int], timeout_s: float = 10.0) -> None:
    """Wait until no process of group ``pgid`` (signal 0 probes without sending anything) and none of
    ``pids`` is left: processes reparented to init die a moment after the SIGKILL."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pgid is not None:
            try:
                os.killpg(pgid, 0)
                time.sleep(0.1)
                continue
            except (ProcessLookupError, PermissionError):
                pass
        if not any(_alive(pid) for pid in pids):
            return
        time.sleep(0.1)
