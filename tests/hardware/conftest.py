"""Fakes for the hardware probe: a pynvml module, a fixed timer, tiny benchmark sizes."""

from __future__ import annotations

import types
from dataclasses import dataclass, field

import pytest
import torch

from autotune.hardware.microbench import BenchSizes, BenchTarget

MIB = 1 << 20


@dataclass
class FakeGpu:
    name: str | bytes = "NVIDIA H100 80GB HBM3"
    total: int = 81559 * MIB
    free: int = 80000 * MIB
    capability: tuple[int, int] = (9, 0)
    sm_clock: int = 1980
    mem_clock: int = 2619
    bus_width: int = 5120
    uuid: str = "GPU-00000000-1111-2222-3333-444444444444"
    unsupported: set[str] = field(default_factory=set)  # names of NVML queries that raise NotSupported


def make_fake_nvml(gpus: list[FakeGpu], *, init_fails: bool = False) -> types.ModuleType:
    """A module with the slice of pynvml's API the probe uses; ``calls`` records init/shutdown."""
    nvml = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    class NVMLError_LibraryNotFound(NVMLError):
        def __str__(self) -> str:
            return "NVML Shared Library Not Found"

    class NVMLError_NotSupported(NVMLError):
        pass

    nvml.NVMLError = NVMLError
    nvml.NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    nvml.NVMLError_NotSupported = NVMLError_NotSupported
    nvml.NVML_CLOCK_SM = 1
    nvml.NVML_CLOCK_MEM = 2
    nvml.calls = []

    def query(name, pick):
        def call(handle, *args):
            gpu = gpus[handle]
            if name in gpu.unsupported:
                raise NVMLError_NotSupported()
            return pick(gpu, *args)

        return call

    def nvmlInit():
        nvml.calls.append("init")
        if init_fails:
            raise NVMLError_LibraryNotFound()

    nvml.nvmlInit = nvmlInit
    nvml.nvmlShutdown = lambda: nvml.calls.append("shutdown")
    nvml.nvmlDeviceGetCount = lambda: len(gpus)
    nvml.nvmlDeviceGetHandleByIndex = lambda index: index
    nvml.nvmlDeviceGetName = query("name", lambda g: g.name)
    nvml.nvmlDeviceGetMemoryInfo = query(
        "memory", lambda g: types.SimpleNamespace(total=g.total, free=g.free, used=g.total - g.free))
    nvml.nvmlDeviceGetCudaComputeCapability = query("capability", lambda g: g.capability)
    nvml.nvmlDeviceGetMaxClockInfo = query(
        "clock", lambda g, kind: {nvml.NVML_CLOCK_SM: g.sm_clock, nvml.NVML_CLOCK_MEM: g.mem_clock}[kind])
    nvml.nvmlDeviceGetMemoryBusWidth = query("bus_width", lambda g: g.bus_width)
    nvml.nvmlDeviceGetUUID = query("uuid", lambda g: g.uuid)
    nvml.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    nvml.nvmlSystemGetCudaDriverVersion = lambda: 12040
    return nvml


FIXED_SECONDS = 1e-3


def fixed_timer(run, iterations: int) -> float:
    """Runs the work like a real timer but reports FIXED_SECONDS per call, making results exact."""
    for _ in range(iterations):
        run()
    return FIXED_SECONDS


TINY_SIZES = BenchSizes(copy_bytes=4096, matmul_n=8, launches=3)


@pytest.fixture
def fixed_target() -> BenchTarget:
    """Real torch tensors on the CPU, timed by :func:`fixed_timer` (stands in for a CUDA device)."""
    return BenchTarget(torch=torch, device="cpu", timer=fixed_timer, repeats=2)


@pytest.fixture
def fake_gpu() -> type[FakeGpu]:
    """The FakeGpu class (fixtures, not imports, share helpers: conftest is not importable by name)."""
    return FakeGpu


@pytest.fixture
def fake_nvml():
    """Factory ``fake_nvml(gpus, init_fails=False)`` of fake pynvml modules."""
    return make_fake_nvml


@pytest.fixture
def tiny_sizes() -> BenchSizes:
    return TINY_SIZES


@pytest.fixture
def fixed_seconds() -> float:
    """Seconds per call that :func:`fixed_target`'s timer reports."""
    return FIXED_SECONDS
