"""Why a server process died, as the parts of one line: its exit status or signal, whether the kernel's
out-of-memory killer acted (the memory cgroup's ``oom_kill`` counter, cgroup v2 ``memory.events`` or v1
``memory.oom_control``; the kernel log's kill line where ``dmesg`` can be read), and the last lines of
its log."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path

OOM_COUNTERS = (Path("/sys/fs/cgroup/memory.events"), Path("/sys/fs/cgroup/memory/memory.oom_control"))
LOG_TAIL_LINES = 3
DMESG_TIMEOUT_S = 5.0


def oom_kills() -> int | None:
    """The memory cgroup's count of processes the OOM killer ended; None where no counter is readable."""
    for path in OOM_COUNTERS:
        try:
            text = path.read_text()
        except OSError:
            continue
        found = re.search(r"^oom_kill (\d+)$", text, re.MULTILINE)
        if found:
            return int(found.group(1))
    return None


def exit_cause(returncode: int) -> str:
    """``exit status 1`` or ``killed by SIGKILL`` (Popen's negative return code is the signal)."""
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


def oom_cause(kills_before: int | None, pids: Iterable[int]) -> str | None:
    """What says the kernel's OOM killer ended one of ``pids`` since ``kills_before`` was read: the
    kernel log's line naming one of them, else the cgroup counter's rise; None when neither does."""
    wanted = {str(pid) for pid in pids}
    for line in reversed(_kernel_log()):
        killed = re.search(r"Killed process (\d+) \(([^)]*)\)", line)
        if killed and killed.group(1) in wanted:
            return f"the kernel's OOM killer ended {killed.group(2)} (pid {killed.group(1)})"
    after = oom_kills()
    if kills_before is not None and after is not None and after > kills_before:
        return f"the kernel's OOM killer ended {after - kills_before} process(es) (cgroup oom_kill {kills_before} -> {after})"
    return None


def _kernel_log() -> list[str]:
    """``dmesg``'s lines; [] where it cannot be read (no permission, no command)."""
    try:
        done = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=DMESG_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return done.stdout.splitlines() if done.returncode == 0 else []


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last non-empty lines of ``log``, joined by `` | `` (one line)."""
    try:
        kept = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return " | ".join(kept[-lines:]) or "no output"
