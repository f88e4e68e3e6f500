"""The CPU as the device: static facts from /proc and the OS, plus torch micro-benchmarks.

Theoretical fp32 peak = physical cores x max clock x FLOP/cycle per core, where FLOP/cycle comes
from the widest FMA the flags advertise: two FMA units x 16 fp32 lanes (512 bit) x 2 FLOP = 64
with AVX-512, 32 with AVX2 + FMA (8 lanes), 8 (4-wide SSE add + 4-wide mul) otherwise.  AMD Zen 4 executes AVX-512 on
256-bit units, so it gets 32.  Peak memory bandwidth depends on channels and DIMMs that no
portable API reports, so it stays ``None``.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from autotune.errors import ProbeError
from autotune.hardware.microbench import (
    BenchSizes,
    BenchTarget,
    copy_bandwidth_gbps,
    launch_overhead_us,
    matmul_flops_per_s,
    wall_timer,
)
from autotune.hardware.profile import HardwareProfile, Metric, fingerprint_of, round_gib

CPUINFO_PATH = Path("/proc/cpuinfo")
CPUFREQ_MAX_PATH = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")  # kHz

# Copies must be far larger than the last-level cache (tens of MiB) to measure RAM, not cache.
FULL_SIZES = BenchSizes(copy_bytes=256 << 20, matmul_n=2048, launches=2000)
QUICK_SIZES = BenchSizes(copy_bytes=64 << 20, matmul_n=1024, launches=500)
FULL_REPEATS = 5
QUICK_REPEATS = 3

_X86_ARCHES = {"x86_64", "amd64", "i386", "i686"}
_ZEN_3_4_FAMILY = 25  # AMD family 19h: Zen 3 (no AVX-512) and Zen 4 (AVX-512 on 256-bit units)


@dataclass(frozen=True)
class CpuInfo:
    """The fields of /proc/cpuinfo the probe uses (``None``/empty where the file lacks them)."""

    model: str | None
    vendor: str | None
    family: int | None
    flags: frozenset[str]
    physical_cores: int | None  # distinct (physical id, core id) pairs
    mhz: float | None  # highest "cpu MHz" over the listed processors


def parse_cpuinfo(text: str) -> CpuInfo:
    """Parse the text of /proc/cpuinfo (x86 layout; other layouts give mostly ``None``)."""
    model = vendor = family = None
    flags: frozenset[str] = frozenset()
    cores: set[tuple[str, str]] = set()
    mhz: list[float] = []
    for block in text.split("\n\n"):
        fields = dict(_key_value(line) for line in block.splitlines() if ":" in line)
        model = model or fields.get("model name") or None
        vendor = vendor or fields.get("vendor_id") or None
        if family is None and fields.get("cpu family", "").isdigit():
            family = int(fields["cpu family"])
        flags = flags or frozenset(fields.get("flags", "").split())
        if "physical id" in fields and "core id" in fields:
            cores.add((fields["physical id"], fields["core id"]))
        if _is_number(fields.get("cpu MHz", "")):
            mhz.append(float(fields["cpu MHz"]))
    return CpuInfo(model=model, vendor=vendor, family=family, flags=flags,
                   physical_cores=len(cores) or None, mhz=max(mhz, default=None))


def _key_value(line: str) -> tuple[str, str]:
    key, _, value = line.partition(":")
    return key.strip(), value.strip()


def _is_number(text: str) -> bool:
    return text.replace(".", "", 1).isdigit()


def flops_per_cycle_fp32(info: CpuInfo, arch: str) -> int | None:
    """fp32 FLOP per cycle per core from the ISA flags, ``None`` off x86 (not derivable here)."""
    if arch.lower() not in _X86_ARCHES:
        return None
    has_fma = "fma" in info.flags
    if has_fma and "avx512f" in info.flags:
        is_zen4 = info.vendor == "AuthenticAMD" and info.family == _ZEN_3_4_FAMILY
        return 32 if is_zen4 else 64
    if has_fma and "avx2" in info.flags:
        return 32
    return 8


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _ram_total_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError) as exc:
        raise ProbeError(f"cannot read the RAM size of this machine ({exc}): "
                         "the probe supports Linux and macOS") from exc


def read_cpu_spec(cpuinfo_path: Path = CPUINFO_PATH, cpufreq_max_path: Path = CPUFREQ_MAX_PATH) -> dict[str, Any]:
    """Static facts about this machine's CPU and RAM, JSON-ready."""
    info = parse_cpuinfo(_read_text(cpuinfo_path))
    arch = platform.machine()
    logical_cores = os.cpu_count() or 1
    physical_cores = info.physical_cores or logical_cores
    max_khz = _read_text(cpufreq_max_path).strip()
    max_mhz = int(max_khz) / 1000 if max_khz.isdigit() else info.mhz
    flops_per_cycle = flops_per_cycle_fp32(info, arch)
    peak_gflops = (physical_cores * max_mhz * 1e6 * flops_per_cycle / 1e9
                   if max_mhz and flops_per_cycle else None)
    return {
        "cpu_model": info.model or platform.processor() or arch or "unknown cpu",
        "cpu_vendor": info.vendor,
        "arch": arch,
        "physical_cores": physical_cores,
        "logical_cores": logical_cores,
        "ram_total_bytes": _ram_total_bytes(),
        "max_mhz": max_mhz,
        "flops_per_cycle_fp32": flops_per_cycle,
        "peak_fp32_gflops": peak_gflops,
    }


def cpu_identity(spec: dict[str, Any]) -> dict[str, Any]:
    """What makes two machines the same for tuning purposes (see the fingerprint decision)."""
    return {"device_type": "cpu", "cpu_model": spec["cpu_model"], "logical_cores": spec["logical_cores"],
            "ram_gib": round_gib(spec["ram_total_bytes"]), "arch": spec["arch"]}


def cpu_name(spec: dict[str, Any]) -> str:
    return f"cpu: {spec['cpu_model']} ({spec['logical_cores']} cores, {round_gib(spec['ram_total_bytes'])} GiB)"


def cpu_bench_target(torch: Any, quick: bool) -> BenchTarget:
    return BenchTarget(torch=torch, device="cpu", timer=wall_timer, repeats=QUICK_REPEATS if quick else FULL_REPEATS)


def probe_cpu(target: BenchTarget, sizes: BenchSizes, *, quick: bool,
              progress: Callable[[str], None]) -> HardwareProfile:
    """Measure the CPU with ``target`` (see :func:`cpu_bench_target`) at the given sizes."""
    torch = target.torch
    progress("reading cpu spec")
    spec = read_cpu_spec()
    spec.update(torch_version=str(torch.__version__), torch_threads=torch.get_num_threads())
    # Source + destination buffers take at most a quarter of RAM.
    copy_bytes = min(sizes.copy_bytes, spec["ram_total_bytes"] // 8)

    progress("measuring memory bandwidth")
    bw = copy_bandwidth_gbps(target, copy_bytes)
    progress("measuring fp32 matmul throughput")
    gflops = matmul_flops_per_s(target, torch.float32, sizes.matmul_n) / 1e9
    progress("measuring op launch overhead")
    launch_us = launch_overhead_us(target, sizes.launches)

    metrics = (
        Metric("memory_bw_gbps", "GB/s", bw, None),
        Metric("matmul_fp32_gflops", "GFLOP/s", gflops, spec["peak_fp32_gflops"]),
        Metric("launch_overhead_us", "us", launch_us, None),
    )
    return HardwareProfile(fingerprint=fingerprint_of(cpu_identity(spec)), name=cpu_name(spec), device_type="cpu",
                           device_count=1, spec=spec, metrics=metrics, quick=quick)
