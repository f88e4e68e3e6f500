"""Device-agnostic torch micro-benchmarks shared by the CPU and the GPU probe.

Each benchmark runs on a :class:`BenchTarget`: the torch module, the device its tensors live on,
and a :class:`Timer` that knows how to time that device (wall clock for the CPU, CUDA events for
a GPU, whose kernels run asynchronously).  Tests pass a fake timer to check the arithmetic.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol


class Timer(Protocol):
    def __call__(self, run: Callable[[], object], iterations: int) -> float:
        """Seconds per call of ``run``, called ``iterations`` times back to back."""


def wall_timer(run: Callable[[], object], iterations: int) -> float:
    """Time synchronous (CPU) work with the monotonic wall clock."""
    start = time.perf_counter()
    for _ in range(iterations):
        run()
    return (time.perf_counter() - start) / iterations


def cuda_event_timer(torch: Any) -> Timer:
    """Time asynchronous CUDA work between two CUDA events recorded on the current stream.

    Events measure when the GPU reached them, so the result is GPU time, not the time the CPU
    took to enqueue the work; synchronising on the end event makes sure it has happened.
    """

    def timer(run: Callable[[], object], iterations: int) -> float:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / iterations  # elapsed_time is in ms

    return timer


@dataclass(frozen=True)
class BenchTarget:
    """Where and how to run the micro-benchmarks."""

    torch: Any  # the torch module
    device: str  # torch device string, e.g. "cpu" or "cuda:0"
    timer: Timer
    repeats: int  # timings per benchmark; the fastest counts (least disturbed by other work)
    device_uuid: str | None = None  # identity of the device, to match it with NVML's list

    def __post_init__(self) -> None:
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")


@dataclass(frozen=True)
class BenchSizes:
    """Problem sizes of one probe run (a preset per device type and quick/full)."""

    copy_bytes: int  # size of each of the copy's source and destination buffers
    matmul_n: int  # square matmul: (n, n) @ (n, n)
    launches: int  # tiny ops timed back to back for the launch overhead


# A timing shorter than this is dominated by timer resolution and, on GPUs, by clocks still
# ramping up; short operations are repeated inside one timing until it is at least this long.
MIN_TIMING_S = 0.02
MAX_ITERATIONS = 1000


def best_seconds(target: BenchTarget, run: Callable[[], object], iterations: int | None = None,
                 warmup: int = 1) -> float:
    """Fastest of ``target.repeats`` timings of ``run``, in seconds per call.

    ``warmup`` untimed calls first pay one-off costs (allocator, cuBLAS handle and heuristics,
    page faults).  Each timing covers ``iterations`` back-to-back calls; ``None`` calibrates
    them from one timed call so that a timing lasts about :data:`MIN_TIMING_S`.
    """
    for _ in range(warmup):
        run()
    if iterations is None:
        once = target.timer(run, 1)
        iterations = max(1, min(MAX_ITERATIONS, math.ceil(MIN_TIMING_S / once))) if once > 0 else MAX_ITERATIONS
    return min(target.timer(run, iterations) for _ in range(target.repeats))


def copy_bandwidth_gbps(target: BenchTarget, nbytes: int) -> float:
    """Memory bandwidth of a buffer-to-buffer copy in GB/s, counting bytes read + bytes written.

    Like STREAM's "copy", write-allocate traffic on CPUs is not counted, so the figure is what
    a streaming kernel (e.g. reading weights once per decode step) can expect.
    """
    torch = target.torch
    if nbytes < 4:
        raise ValueError(f"copy size must be at least 4 bytes, got {nbytes}")
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=target.device)  # (N,)
    dst = torch.empty_like(src)  # (N,)
    seconds = best_seconds(target, lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size() / seconds / 1e9


def matmul_flops_per_s(target: BenchTarget, dtype: Any, n: int) -> float:
    """Throughput of an (n, n) @ (n, n) matmul in FLOP/s: 2·n³ (one multiply + one add per MAC)."""
    torch = target.torch
    if n < 1:
        raise ValueError(f"matmul size must be >= 1, got {n}")
    a = torch.randn(n, n, dtype=dtype, device=target.device)  # (n, n)
    b = torch.randn(n, n, dtype=dtype, device=target.device)  # (n, n)
    out = torch.empty(n, n, dtype=dtype, device=target.device)  # (n, n)
    seconds = best_seconds(target, lambda: torch.mm(a, b, out=out))
    return 2 * n**3 / seconds


def launch_overhead_us(target: BenchTarget, launches: int) -> float:
    """Microseconds per tiny op (an in-place add on one element) launched back to back.

    The op does no real work, so the time is the fixed per-op cost: Python + torch dispatch and,
    on a GPU, the kernel launch.  It is the floor of every decode step's per-layer op.
    """
    torch = target.torch
    if launches < 1:
        raise ValueError(f"launches must be >= 1, got {launches}")
    x = torch.zeros(1, device=target.device)  # (1,)
    return best_seconds(target, lambda: x.add_(1.0), iterations=launches) * 1e6
