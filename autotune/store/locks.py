"""A named lock shared by every process using the database: short critical sections of
distributed tuning (counting a study's trials before asking for one, replacing its profile) and
migrations.

PostgreSQL: a session-level advisory lock, keyed by a hash of the name, so workers on several
machines exclude each other; the server drops it if the holder dies, or loses its connection to
a server restart (the rest of that block then runs unprotected: at worst a race of the kind the
lock prevents, such as one trial over the budget, never a lost row). SQLite (one machine by
nature): an exclusive ``flock`` on a file beside the database, dropped by the kernel if the holder
dies. An in-memory SQLite database lives in one process: a thread lock is enough.

A lock taken with a ``timeout_s`` is tried with backoff until then; past it a DatabaseError says
which lock, on which database, and which processes hold it (:func:`file_lock_holders`, PostgreSQL's
``pg_locks``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import random
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from autotune.errors import DatabaseError

_MEMORY_LOCK = threading.Lock()


def lock_key(name: str) -> int:
    """A signed 64-bit key for ``name`` (PostgreSQL advisory locks take a bigint)."""
    digest = hashlib.sha256(f"autotune:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def backoff(timeout_s: float, first_s: float = 0.005, longest_s: float = 0.25) -> Iterator[None]:
    """Yield once per try, sleeping a jittered, doubling delay between tries, until ``timeout_s``
    has passed (the last try falls at the deadline at the latest). Jitter keeps processes released
    together from retrying in lock-step."""
    deadline = time.monotonic() + timeout_s
    delay = first_s
    while True:
        yield
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, delay * random.uniform(0.5, 1.5)))
        delay = min(2 * delay, longest_s)


@contextmanager
def named_lock(engine: Engine, name: str, *, timeout_s: float | None = None) -> Iterator[None]:
    """Hold the database-wide lock called ``name`` for the duration of the block (SQLite: one
    lock per database file, whatever the name). Without ``timeout_s`` wait as long as it takes;
    with it, raise DatabaseError naming the holders once that many seconds have passed."""
    url = engine.url
    if url.get_backend_name() == "postgresql":
        with _advisory_lock(engine, name, timeout_s):
            yield
    elif url.database and url.database != ":memory:":
        with _file_lock(Path(f"{url.database}.lock"), name, timeout_s):
            yield
    else:
        with _MEMORY_LOCK:
            yield


@contextmanager
def _file_lock(path: Path, name: str, timeout_s: float | None) -> Iterator[None]:
    with open(path, "a+") as handle:
        if timeout_s is None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        elif not any(_try_flock(handle) for _ in backoff(timeout_s)):
            raise DatabaseError(f"gave up after {timeout_s:g} s waiting for the {name} lock ({path}): "
                                f"{describe_holders(file_lock_holders([path]))}")
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _try_flock(handle) -> bool:  # noqa: ANN001 - an open file
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextmanager
def _advisory_lock(engine: Engine, name: str, timeout_s: float | None) -> Iterator[None]:
    key = lock_key(name)
    with engine.connect() as connection:
        if timeout_s is None:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
        elif not any(connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}).scalar()
                     for _ in backoff(timeout_s)):
            holders = _advisory_lock_holders(connection, key)
            connection.commit()
            raise DatabaseError(f"gave up after {timeout_s:g} s waiting for the {name} lock on the database: "
                                f"{describe_holders(holders)}")
        connection.commit()
        try:
            yield
        finally:
            try:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                connection.commit()
            except DBAPIError as exc:
                # The server ends a session's advisory locks with the session: a connection lost
                # while holding the lock (server restarted) left nothing to release.
                if not exc.connection_invalidated:
                    raise


def _advisory_lock_holders(connection: Connection, key: int) -> list[str]:
    """The server sessions holding advisory lock ``key``: pg_locks splits the bigint into classid
    (high 32 bits) and objid (low 32 bits), with objsubid 1."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    rows = connection.execute(text(
        "SELECT l.pid, a.application_name, a.client_addr, a.backend_start FROM pg_locks l "
        "LEFT JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
        "AND l.classid = :high AND l.objid = :low AND l.objsubid = 1"
    ), {"high": unsigned >> 32, "low": unsigned & 0xFFFF_FFFF}).all()
    return [f"server process {pid} ({application or 'no application name'}, "
            f"{'from ' + str(address) if address else 'local socket'}, connected {str(start)[:19]})"
            for pid, application, address, start in rows]


def file_lock_holders(paths: Iterable[Path]) -> list[str]:
    """The other processes of this machine holding a lock (flock or POSIX byte-range, as SQLite
    takes) on any of ``paths``, each as "process PID (command line)", read from ``/proc/locks``;
    empty where that cannot be read (not Linux) or nobody holds one."""
    inodes = {}
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            continue
        inodes[(os.major(stat.st_dev), os.minor(stat.st_dev), stat.st_ino)] = path
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    pids: list[int] = []
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->":  # "->" marks a waiter, not a holder
            continue
        try:
            pid = int(fields[4])
            major, minor, inode = fields[5].split(":")
            where = (int(major, 16), int(minor, 16), int(inode))
        except ValueError:
            continue
        if where in inodes and pid != os.getpid() and pid not in pids:
            pids.append(pid)
    return [f"process {pid} ({_command_line(pid)})" for pid in pids]


def _command_line(pid: int) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "command unknown"
    # Line breaks and tabs inside an argument (a `python -c` script) would break the one-line message.
    line = " ".join(" ".join(word.decode(errors="replace").split()) for word in words if word)
    return line if len(line) <= 120 else line[:117] + "..."


def describe_holders(holders: list[str]) -> str:
    """One clause for an error message: who holds a lock, and what to do."""
    if not holders:
        return "another process holds it (none could be named); retry once it has finished"
    return f"held by {', '.join(holders)}; retry once it has finished, or stop it"
