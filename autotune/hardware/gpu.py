"""NVIDIA GPUs as the device: static facts through NVML, throughput through torch CUDA benchmarks.

Everything here receives its dependencies: :func:`read_nvml` the pynvml module, :func:`probe_gpu`
an NVML snapshot and a :class:`BenchTarget`, so tests drive the code with a fake NVML and a CPU
target.  Only :func:`cuda_bench_target` touches ``torch.cuda``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from autotune.hardware.catalog import gpu_peaks
from autotune.hardware.cpu import read_cpu_spec
from autotune.hardware.microbench import (
    BenchSizes,
    BenchTarget,
    copy_bandwidth_gbps,
    cuda_event_timer,
    launch_overhead_us,
    matmul_flops_per_s,
)
from autotune.hardware.profile import DeviceInfo, HardwareProfile, Metric, fingerprint_of, round_gib

BENCH_DEVICE = "cuda:0"
# 8192² bf16 is ~1.1 TFLOP, long enough (~1.5 ms on an H100) to reach steady tensor-core rate.
FULL_SIZES = BenchSizes(copy_bytes=1 << 30, matmul_n=8192, launches=2000)
QUICK_SIZES = BenchSizes(copy_bytes=256 << 20, matmul_n=4096, launches=500)
FULL_REPEATS = 5
QUICK_REPEATS = 3


def peak_bandwidth_gbps(mem_clock_mhz: float, bus_width_bits: int) -> float:
    """Theoretical memory bandwidth in GB/s from NVML's max memory clock and bus width.

    NVML reports the clock such that two transfers per clock per pin give the datasheet rate:
    H100 SXM 2619 MHz x 2 x 5120 bit / 8 = 3352 GB/s; A10 (GDDR6) 6251 MHz x 2 x 384 bit / 8 = 600 GB/s.
    """
    return mem_clock_mhz * 1e6 * 2 * bus_width_bits / 8 / 1e9


@dataclass(frozen=True)
class NvmlSnapshot:
    """Every GPU NVML sees (all of them: NVML ignores CUDA_VISIBLE_DEVICES) and the driver versions."""

    devices: tuple[DeviceInfo, ...]
    driver_version: str | None
    cuda_driver_version: str | None  # highest CUDA version the driver supports, e.g. "12.4"


def read_nvml(nvml: Any) -> NvmlSnapshot:
    """Read the GPUs through the pynvml module ``nvml``.

    Raises ``nvml.NVMLError`` (e.g. ``NVMLError_LibraryNotFound``) when NVML itself is unusable;
    queries a GPU or driver does not support just give ``None`` fields.
    """
    nvml.nvmlInit()
    try:
        devices = tuple(_read_device(nvml, index) for index in range(nvml.nvmlDeviceGetCount()))
        driver = _optional(nvml, lambda: _text(nvml.nvmlSystemGetDriverVersion()))
        cuda = _optional(nvml, nvml.nvmlSystemGetCudaDriverVersion)
        return NvmlSnapshot(devices=devices, driver_version=driver,
                            cuda_driver_version=None if cuda is None else _cuda_version(cuda))
    finally:
        nvml.nvmlShutdown()


def _read_device(nvml: Any, index: int) -> DeviceInfo:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    capability = _optional(nvml, lambda: nvml.nvmlDeviceGetCudaComputeCapability(handle))
    mem_clock = _optional(nvml, lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM))
    bus_width = _optional(nvml, lambda: nvml.nvmlDeviceGetMemoryBusWidth(handle))
    return DeviceInfo(
        index=index,
        name=_text(nvml.nvmlDeviceGetName(handle)),
        memory_total_bytes=int(memory.total),
        memory_free_bytes=int(memory.free),
        compute_capability=None if capability is None else "{}.{}".format(*capability),
        sm_clock_mhz=_optional(nvml, lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)),
        mem_clock_mhz=mem_clock,
        mem_bus_width_bits=bus_width,
        peak_bw_gbps=peak_bandwidth_gbps(mem_clock, bus_width) if mem_clock and bus_width else None,
        uuid=_optional(nvml, lambda: _text(nvml.nvmlDeviceGetUUID(handle))),
    )


def _optional(nvml: Any, query: Callable[[], Any]) -> Any:
    """The query's result, or ``None`` where this GPU or driver does not support it."""
    try:
        return query()
    except nvml.NVMLError:
        return None


def _text(value: str | bytes) -> str:
    # Older pynvml releases return bytes, newer ones str.
    return value.decode() if isinstance(value, bytes) else value


def _cuda_version(encoded: int) -> str:
    # NVML encodes CUDA versions as 1000 * major + 10 * minor: 12040 -> "12.4".
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def gpu_identity(devices: tuple[DeviceInfo, ...]) -> dict[str, Any]:
    """What makes two machines the same for tuning purposes: models, memory sizes, count; not UUIDs."""
    return {"device_type": "cuda", "device_count": len(devices),
            "devices": sorted([d.name, round_gib(d.memory_total_bytes), d.compute_capability] for d in devices)}


def gpu_name(devices: tuple[DeviceInfo, ...]) -> str:
    """E.g. "8x NVIDIA H100 80GB HBM3", or "1x NVIDIA A10 + 1x NVIDIA L4" for mixed machines."""
    counts = Counter(d.name for d in devices)
    return " + ".join(f"{count}x {name}" for name, count in sorted(counts.items()))


def cuda_bench_target(torch: Any, quick: bool) -> BenchTarget:
    """Benchmark ``cuda:0`` timed with CUDA events."""
    uuid = getattr(torch.cuda.get_device_properties(BENCH_DEVICE), "uuid", None)
    return BenchTarget(torch=torch, device=BENCH_DEVICE, timer=cuda_event_timer(torch),
                       repeats=QUICK_REPEATS if quick else FULL_REPEATS,
                       device_uuid=None if uuid is None else str(uuid))


def benchmarked_index(devices: tuple[DeviceInfo, ...], device_uuid: str | None) -> int:
    """Position in NVML's list of the device torch benchmarks (0 when its UUID is unknown).

    torch numbers only the GPUs CUDA_VISIBLE_DEVICES leaves visible, NVML numbers all of them,
    so they are matched by UUID (NVML writes "GPU-<uuid>", torch the bare uuid).
    """
    if device_uuid:
        wanted = device_uuid.removeprefix("GPU-")
        for position, device in enumerate(devices):
            if device.uuid and device.uuid.removeprefix("GPU-") == wanted:
                return position
    return 0


def probe_gpu(snapshot: NvmlSnapshot, target: BenchTarget, sizes: BenchSizes, *, quick: bool,
              progress: Callable[[str], None]) -> HardwareProfile:
    """Benchmark the GPU of ``target`` and describe all GPUs of ``snapshot`` (which must list at least one)."""
    if not snapshot.devices:
        raise ValueError("probe_gpu needs at least one GPU in the NVML snapshot")
    torch = target.torch
    index = benchmarked_index(snapshot.devices, target.device_uuid)
    device = snapshot.devices[index]
    peaks = gpu_peaks(device.name)
    # Source + destination buffers take at most a quarter of the free memory.
    copy_bytes = min(sizes.copy_bytes, (device.memory_free_bytes or device.memory_total_bytes) // 8)

    progress("measuring device-to-device copy bandwidth")
    bw = copy_bandwidth_gbps(target, copy_bytes)
    progress("measuring bf16 matmul throughput")
    bf16_tflops = matmul_flops_per_s(target, torch.bfloat16, sizes.matmul_n) / 1e12
    progress("measuring fp16 matmul throughput")
    fp16_tflops = matmul_flops_per_s(target, torch.float16, sizes.matmul_n) / 1e12
    progress("measuring kernel launch overhead")
    launch_us = launch_overhead_us(target, sizes.launches)

    peak_bw = device.peak_bw_gbps or (peaks.memory_bw_gbps if peaks else None)
    metrics = (
        Metric("copy_bw_gbps", "GB/s", bw, peak_bw),
        Metric("matmul_bf16_tflops", "TFLOP/s", bf16_tflops, peaks.bf16_tflops if peaks else None),
        Metric("matmul_fp16_tflops", "TFLOP/s", fp16_tflops, peaks.fp16_tflops if peaks else None),
        Metric("launch_overhead_us", "us", launch_us, None),
    )
    spec = {
        "devices": [d.to_dict() for d in snapshot.devices],
        "benchmarked_device": index,
        "driver_version": snapshot.driver_version,
        "cuda_driver_version": snapshot.cuda_driver_version,
        "torch_version": str(torch.__version__),
        "torch_cuda_version": torch.version.cuda,
        "host_cpu": read_cpu_spec(),
    }
    return HardwareProfile(fingerprint=fingerprint_of(gpu_identity(snapshot.devices)), name=gpu_name(snapshot.devices),
                           device_type="cuda", device_count=len(snapshot.devices), spec=spec, metrics=metrics,
                           quick=quick)
