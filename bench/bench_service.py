"""How fast does `autotune serve` answer /v1/profiles/best under load? (figures, not a test)

Issue 23's benchmark: a scratch PostgreSQL database holding 100,000 measurements (the synthetic
studies of bench_profiles_best.py, bulk-inserted after the migrations: 4 machines, 5 target
models, 7 concurrency levels, half of the studies on one hot pair), a live ``autotune serve`` on it (its
own process, as shipped: uvicorn, the access log off unless --access-log, output to a file), and N concurrent clients
(asyncio, one keep-alive connection each, a bare HTTP/1.1 client: see :func:`client`) each sending M requests back to back (a closed loop)
that cycle through the five best-profile questions of bench_profiles_best.py. Prints p50 and p99
latency with 95 % order-statistic intervals, the spread of p99 over ten consecutive slices of the
run, throughput, errors (any answer but 200, or no answer), the CPU seconds the machine, the server
and the clients spent, and the load average before and after. The scratch database is dropped afterwards.

The intervals treat requests as independent; in a closed loop they are not (a slow moment slows
every client), which is why the per-slice p99 range is printed too.

    python bench/bench_service.py                                  # 50 clients x 2,000 requests
    python bench/bench_service.py --clients 50 --requests 200      # 10,000 requests
    python bench/bench_service.py --measurements 20000 --clients 4 --requests 100  # a quick try
    python bench/bench_service.py --answer-cache-s 0 --requests 100  # every request asks PostgreSQL
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import httpx

from bench_profiles_best import DEFAULT_POSTGRES, REQUESTS, fill, postgres_database

HOST = "127.0.0.1"
PATH = "/v1/profiles/best"
SLICES = 10
Z95 = 1.96


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(db_url: str, port: int, log: Path, answer_cache_s: float | None,
                 access_log: bool = False) -> subprocess.Popen:
    """``autotune serve`` (the console script next to this Python) on ``port``, its log in ``log``,
    keeping answers ``answer_cache_s`` (None: its default); returns once /healthz answers."""
    command = shutil.which("autotune", path=str(Path(sys.executable).parent)) or "autotune"
    cache = [] if answer_cache_s is None else ["--answer-cache-s", str(answer_cache_s)]
    cache += ["--access-log"] if access_log else []
    with log.open("wb") as out:
        server = subprocess.Popen([command, "serve", "--db", db_url, "--port", str(port), *cache], stdout=out,
                                  stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"autotune serve exited with {server.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit(f"autotune serve did not answer within 60 s:\n{log.read_text()}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy since boot (Linux /proc/stat: everything but idle and iowait)."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def request_bytes(host: str, port: int, params: dict) -> bytes:
    """One keep-alive GET of :data:`PATH` with ``params``, encoded once."""
    return (f"GET {PATH}?{urlencode(params)} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Accept: application/json\r\n\r\n").encode("ascii")


async def client(host: str, port: int, requests: int, offset: int, samples: list[tuple[float, float]],
                 errors: list[str]) -> None:
    """One client: ``requests`` questions back to back on one keep-alive connection; (start,
    latency in ms) per answer.

    A bare HTTP/1.1 client on asyncio streams rather than httpx: httpx's AsyncClient cost 2.1 ms
    of CPU a request here, more than the server's 1.5 (2026-12-05, 50 x 2,000), so the clients,
    sharing the server's 2 cores, were what the benchmark measured. This one sends pre-encoded
    requests and reads the status line, the headers and Content-Length bytes of body."""
    encoded = [request_bytes(host, port, params) for params in REQUESTS.values()]
    reader, writer = await asyncio.open_connection(host, port)
    try:
        for i in range(requests):
            start = time.perf_counter()
            try:
                writer.write(encoded[(offset + i) % len(encoded)])
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                await reader.readexactly(length)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, StopIteration) as exc:
                errors.append(type(exc).__name__)
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
                continue
            samples.append((start, (time.perf_counter() - start) * 1000))
            status = head.split(b" ", 2)[1]
            if status != b"200":
                errors.append(status.decode("ascii", "replace"))
    finally:
        writer.close()


async def load(port: int, clients: int, requests: int) -> tuple[list[tuple[float, float]], list[str], float]:
    samples: list[tuple[float, float]] = []
    errors: list[str] = []
    start = time.perf_counter()
    await asyncio.gather(*(client(HOST, port, requests, c, samples, errors) for c in range(clients)))
    return samples, errors, time.perf_counter() - start


def quantile_interval(sorted_ms: list[float], q: float) -> tuple[float, float, float]:
    """The q-quantile and its 95 % distribution-free interval (order statistics, normal
    approximation to the binomial)."""
    n = len(sorted_ms)
    half = Z95 * math.sqrt(n * q * (1 - q))
    low, high = max(0, math.floor(n * q - half)), min(n - 1, math.ceil(n * q + half))
    return sorted_ms[min(n - 1, int(n * q))], sorted_ms[low], sorted_ms[high]


def slice_p99s(samples: list[tuple[float, float]]) -> list[float]:
    """p99 of each of :data:`SLICES` consecutive slices of the run, by start time."""
    ordered = [ms for _, ms in sorted(samples)]
    size = max(1, len(ordered) // SLICES)
    return [sorted(part)[int(0.99 * (len(part) - 1))] for part in
            (ordered[i:i + size] for i in range(0, len(ordered), size)) if len(part) == size]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measurements", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients")
    parser.add_argument("--requests", type=int, default=2_000, help="requests per client")
    parser.add_argument("--warmup", type=int, default=20, help="requests per client before timing")
    parser.add_argument("--answer-cache-s", type=float, default=None,
                        help="the server's --answer-cache-s (default: its own; 0: every request asks PostgreSQL)")
    parser.add_argument("--access-log", action="store_true",
                        help="the server's --access-log (a line per request; off as shipped)")
    parser.add_argument("--postgres-url", default=os.environ.get("AUTOTUNE_TEST_POSTGRES_URL", DEFAULT_POSTGRES))
    args = parser.parse_args()

    with postgres_database(args.postgres_url) as url, tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        fill(url, args.measurements)
        print(f"PostgreSQL: {args.measurements:,} measurements stored in {time.perf_counter() - started:.1f} s")
        port = free_port()
        server = start_server(url, port, Path(folder) / "serve.log", args.answer_cache_s, args.access_log)
        try:
            _, warm_errors, _ = asyncio.run(load(port, args.clients, args.warmup))
            if warm_errors:
                raise SystemExit(f"errors while warming up: {sorted(set(warm_errors))}")
            load_before = os.getloadavg()
            cpu_before = machine_busy_seconds(), cpu_seconds(server.pid), time.process_time()
            samples, errors, wall = asyncio.run(load(port, args.clients, args.requests))
            cpu = [after - before for after, before in
                   zip((machine_busy_seconds(), cpu_seconds(server.pid), time.process_time()), cpu_before)]
            load_after = os.getloadavg()
        finally:
            server.terminate()
            server.wait(30)
    report(args, samples, errors, wall, cpu, load_before, load_after)


def report(args: argparse.Namespace, samples: list[tuple[float, float]], errors: list[str], wall: float,
           cpu: list[float], load_before: tuple, load_after: tuple) -> None:
    """Print the figures; ``cpu``: busy CPU seconds of the machine, the server and the clients during the run."""
    total = args.clients * args.requests
    ordered = sorted(ms for _, ms in samples)
    cache = "its default" if args.answer_cache_s is None else f"{args.answer_cache_s:g} s"
    print(f"server: autotune serve, answers kept {cache}, access log {'on' if args.access_log else 'off'}")
    print(f"{args.clients} clients x {args.requests:,} requests = {total:,} to {PATH} in {wall:.1f} s: "
          f"{len(samples) / wall:,.0f} answers/s; errors {len(errors)}"
          + (f" ({', '.join(sorted(set(errors)))})" if errors else ""))
    for name, q in (("p50", 0.50), ("p99", 0.99)):
        value, low, high = quantile_interval(ordered, q)
        print(f"  {name} {value:7.1f} ms  (95 % interval {low:.1f} - {high:.1f})")
    p99s = slice_p99s(samples)
    print(f"  p99 of {len(p99s)} consecutive slices: {min(p99s):.1f} - {max(p99s):.1f} ms; "
          f"max {ordered[-1]:.1f} ms")
    machine, server, clients = cpu
    print(f"  CPU seconds: machine {machine:.1f} of {os.cpu_count()} cores x {wall:.1f} s; server {server:.1f} "
          f"({1000 * server / len(samples):.2f} ms a request), clients {clients:.1f}, the rest (PostgreSQL, "
          f"other processes) {machine - server - clients:.1f}")
    print(f"  load average (1/5/15 min) before {'/'.join(f'{x:.2f}' for x in load_before)}, "
          f"after {'/'.join(f'{x:.2f}' for x in load_after)}")


if __name__ == "__main__":
    main()
