"""Entry point of the hardware probe: pick the device, measure it, return a HardwareProfile.

"auto" benchmarks GPU ``cuda:0`` when NVML lists NVIDIA GPUs *and* torch can use CUDA, and falls
back to the CPU otherwise, recording in ``spec["notes"]`` why (and, when NVML saw GPUs that torch
cannot use, those GPUs in ``spec["nvml_gpus"]``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

from autotune.errors import ConfigurationError, ProbeError
from autotune.hardware import cpu, gpu
from autotune.hardware.profile import HardwareProfile, fingerprint_of

DEVICES = ("auto", "cpu", "cuda")


class _Steps:
    """Forwards step descriptions to the caller's progress callback and remembers the current one."""

    def __init__(self, progress: Callable[[str], None] | None) -> None:
        self._progress = progress
        self.current = "starting"

    def __call__(self, step: str) -> None:
        self.current = step
        if self._progress is not None:
            self._progress(step)


def probe_hardware(quick: bool = False, device: str = "auto",
                   progress: Callable[[str], None] | None = None) -> HardwareProfile:
    """Measure this machine.

    ``device``: "auto" (GPU if NVML and torch CUDA both work, else CPU), "cpu" (force the CPU,
    NVML untouched) or "cuda" (GPU or a ProbeError saying why not).  ``quick`` trades accuracy for
    time with fewer repeats and smaller sizes.  ``progress`` receives a short description of each
    step.  Raises ProbeError when a measurement fails.
    """
    if device not in DEVICES:
        raise ConfigurationError(f"unknown probe device {device!r}: use one of {', '.join(DEVICES)}")
    steps = _Steps(progress)
    start = time.perf_counter()
    try:
        profile = _probe_cpu(quick, steps) if device == "cpu" else _probe_preferring_gpu(quick, steps, device == "cuda")
    except RuntimeError as exc:  # torch's errors, CUDA out-of-memory included
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ProbeError(f"the hardware probe failed while {steps.current} ({reason}); "
                         "free memory used by other programs or retry with --quick") from exc
    return replace(profile, duration_s=time.perf_counter() - start)


def _probe_cpu(quick: bool, steps: _Steps) -> HardwareProfile:
    import torch

    sizes = cpu.QUICK_SIZES if quick else cpu.FULL_SIZES
    return cpu.probe_cpu(cpu.cpu_bench_target(torch, quick), sizes, quick=quick, progress=steps)


def _probe_preferring_gpu(quick: bool, steps: _Steps, require_gpu: bool) -> HardwareProfile:
    import torch

    snapshot, why_not_gpu = _read_gpus(steps)
    if snapshot is not None:
        if torch.cuda.is_available():
            sizes = gpu.QUICK_SIZES if quick else gpu.FULL_SIZES
            try:
                return gpu.probe_gpu(snapshot, gpu.cuda_bench_target(torch, quick), sizes, quick=quick,
                                     progress=steps)
            finally:
                # Return the benchmark buffers to the driver: engines started later in this process
                # (TensorRT-LLM) size their KV cache from the driver's free memory.
                torch.cuda.empty_cache()
        why_not_gpu = (f"NVML found {len(snapshot.devices)} NVIDIA GPU(s) but torch {torch.__version__} cannot use "
                       "CUDA (a CPU-only build?): install a CUDA build of torch to benchmark them")
    if require_gpu:
        raise ProbeError(f"cannot probe the GPU: {why_not_gpu}")
    profile = _probe_cpu(quick, steps)
    extra = {"notes": [f"benchmarked the CPU because {why_not_gpu}"]}
    if snapshot is not None:
        extra["nvml_gpus"] = [d.to_dict() for d in snapshot.devices]
    return replace(profile, spec={**profile.spec, **extra})


def _read_gpus(steps: _Steps) -> tuple[gpu.NvmlSnapshot | None, str | None]:
    """NVML's view of the GPUs, or ``None`` and the reason there is none."""
    try:
        import pynvml
    except ImportError:
        return None, "pynvml (package nvidia-ml-py) is not installed"
    steps("reading NVIDIA GPUs through NVML")
    try:
        snapshot = gpu.read_nvml(pynvml)
    except pynvml.NVMLError as exc:
        return None, f"NVML is unavailable ({exc}): no usable NVIDIA driver"
    if not snapshot.devices:
        return None, "NVML found no NVIDIA GPU"
    return snapshot, None


def identify_hardware(device: str = "auto") -> tuple[str, str]:
    """``(fingerprint, name)`` of this machine without benchmarking anything.

    Follows :func:`probe_hardware`'s choice of device, so the key equals the one a probe stores:
    the GPUs when NVML lists them and torch can use CUDA, else the CPU.
    """
    if device not in DEVICES:
        raise ConfigurationError(f"unknown probe device {device!r}: use one of {', '.join(DEVICES)}")
    if device != "cpu":
        snapshot, why_not_gpu = _read_gpus(_Steps(None))
        if snapshot is not None:
            import torch

            if torch.cuda.is_available():
                return fingerprint_of(gpu.gpu_identity(snapshot.devices)), gpu.gpu_name(snapshot.devices)
            why_not_gpu = "torch cannot use CUDA"
        if device == "cuda":
            raise ProbeError(f"cannot identify the GPU: {why_not_gpu}")
    spec = cpu.read_cpu_spec()
    return fingerprint_of(cpu.cpu_identity(spec)), cpu.cpu_name(spec)
