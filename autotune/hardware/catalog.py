"""Published specs of common NVIDIA data-centre GPUs: by the name NVML reports (the probe's peaks)
and by a short name (``autotune plan --hardware h200``: what-if for hardware you do not have).

NVML gives memory clock and bus width (hence peak bandwidth) but no tensor-core throughput, so
the probe looks TFLOP/s peaks up here.  Figures are NVIDIA datasheet values for *dense* math
(the datasheets' headline numbers assume 2:4 sparsity and are twice these); unknown GPUs get
``None`` peaks rather than a guess.

Memory sizes are the datasheets' capacities, which for HBM parts are binary (NVML reports 81,559
MiB for an "80 GB" H100 and 143,771 MiB for a "141 GB" H200), so they are counted in GiB here.

Launch overhead (an assumption, not a datasheet figure): a serving engine replays each forward
pass as a CUDA graph; the graph launch plus the step's sampling and bookkeeping kernels cost about
``PASS_OVERHEAD_US`` per forward pass, and each decoder layer's ~8 kernels (norms, GEMMs, RoPE,
attention, activation) leave ~``LAYER_OVERHEAD_US`` of gaps and tails the roofline's bytes and
FLOPs do not account for. MTP modules run inside the target's graph, so they pay the per-layer part
only (see :mod:`autotune.perfmodel.roofline`). These two numbers dominate only for small models;
for a 7B+ model a step is tens of milliseconds of weight reads.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from autotune.errors import ConfigurationError

GIB = 1 << 30
PASS_OVERHEAD_US = 20.0  # per forward pass: CUDA-graph launch, sampling, step bookkeeping (assumed)
LAYER_OVERHEAD_US = 3.0  # per decoder layer: ~8 kernels' launch gaps and tails inside a graph (assumed)


@dataclass(frozen=True)
class GpuPeaks:
    memory_bw_gbps: float
    bf16_tflops: float  # dense tensor-core, fp32 accumulate
    fp16_tflops: float  # dense tensor-core, fp32 accumulate


def _same(bw_gbps: float, half_tflops: float) -> GpuPeaks:
    # On these architectures bf16 and fp16 tensor-core rates are equal.
    return GpuPeaks(memory_bw_gbps=bw_gbps, bf16_tflops=half_tflops, fp16_tflops=half_tflops)


_PEAKS_BY_NVML_NAME: dict[str, GpuPeaks] = {
    "NVIDIA B200": _same(8000.0, 2250.0),
    "NVIDIA H200": _same(4800.0, 989.4),  # SXM
    "NVIDIA H200 NVL": _same(4800.0, 835.5),
    "NVIDIA H100 80GB HBM3": _same(3350.0, 989.4),  # SXM5
    "NVIDIA H100 NVL": _same(3900.0, 835.5),
    "NVIDIA H100 PCIe": _same(2000.0, 756.0),
    "NVIDIA A100-SXM4-80GB": _same(2039.0, 312.0),
    "NVIDIA A100-SXM4-40GB": _same(1555.0, 312.0),
    "NVIDIA A100 80GB PCIe": _same(1935.0, 312.0),
    "NVIDIA A100-PCIE-40GB": _same(1555.0, 312.0),
    "NVIDIA L40S": _same(864.0, 362.05),
    "NVIDIA L4": _same(300.0, 121.0),
    "NVIDIA A10": _same(600.0, 125.0),
}


def gpu_peaks(name: str) -> GpuPeaks | None:
    """Peaks of the GPU NVML calls ``name`` (exact match: "NVIDIA A10" is not an A100), or ``None``."""
    return _PEAKS_BY_NVML_NAME.get(name.strip())


# -- accelerators by short name (what-if planning) ----------------------------------------------------


@dataclass(frozen=True)
class AcceleratorSpec:
    """What the roofline needs of one device: memory, bandwidth, peak FLOP/s at the compute dtype,
    and the assumed overheads (see the module doc). ``source`` says where the figures come from."""

    name: str
    memory_bytes: int
    memory_bw_gbps: float
    bf16_tflops: float | None
    fp16_tflops: float | None
    fp32_tflops: float | None = None
    dtype: str = "bf16"  # the compute dtype of weights, activations and KV cache
    pass_overhead_us: float = PASS_OVERHEAD_US
    layer_overhead_us: float = LAYER_OVERHEAD_US
    device_type: str = "cuda"
    source: str = "catalog"

    def __post_init__(self) -> None:
        if self.dtype not in ("bf16", "fp16", "fp32"):
            raise ValueError(f"dtype must be bf16, fp16 or fp32, got {self.dtype!r}")
        if self.peak_tflops is None or self.peak_tflops <= 0 or self.memory_bw_gbps <= 0:
            raise ValueError(f"{self.name}: the roofline needs a bandwidth and a {self.dtype} FLOP/s peak")

    @property
    def peak_tflops(self) -> float | None:
        """Dense peak at the compute dtype."""
        return {"bf16": self.bf16_tflops, "fp16": self.fp16_tflops, "fp32": self.fp32_tflops}[self.dtype]

    @property
    def dtype_bytes(self) -> int:
        return 4 if self.dtype == "fp32" else 2

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "peak_tflops": self.peak_tflops, "dtype_bytes": self.dtype_bytes}


# Memory per GPU in GiB (module doc), from the same datasheets as the peaks.
_MEMORY_GIB_BY_NVML_NAME: dict[str, int] = {
    # B200: the DGX/HGX B200 datasheets give 1,440 GB for 8 GPUs, 180 GB HBM3e per GPU (early
    # announcements said 192 GB); 8 TB/s and 4.5 PFLOP/s sparse, 2.25 dense, FP16/BF16.
    "NVIDIA B200": 180,
    "NVIDIA H200": 141,
    "NVIDIA H200 NVL": 141,
    "NVIDIA H100 80GB HBM3": 80,
    "NVIDIA H100 NVL": 94,
    "NVIDIA H100 PCIe": 80,
    "NVIDIA A100-SXM4-80GB": 80,
    "NVIDIA A100-SXM4-40GB": 40,
    "NVIDIA A100 80GB PCIe": 80,
    "NVIDIA A100-PCIE-40GB": 40,
    "NVIDIA L40S": 48,
    "NVIDIA L4": 24,
    "NVIDIA A10": 24,
}
# Short name -> (NVML name, display name).
_SHORT_NAMES: dict[str, tuple[str, str]] = {
    "h100-sxm": ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM 80GB"),
    "h100-pcie": ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe 80GB"),
    "h100-nvl": ("NVIDIA H100 NVL", "NVIDIA H100 NVL 94GB"),
    "h200": ("NVIDIA H200", "NVIDIA H200 SXM 141GB"),
    "h200-nvl": ("NVIDIA H200 NVL", "NVIDIA H200 NVL 141GB"),
    "b200": ("NVIDIA B200", "NVIDIA B200 180GB"),
    "a100-80gb": ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM 80GB"),
    "a100-40gb": ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 SXM 40GB"),
    "l40s": ("NVIDIA L40S", "NVIDIA L40S 48GB"),
    "l4": ("NVIDIA L4", "NVIDIA L4 24GB"),
    "a10": ("NVIDIA A10", "NVIDIA A10 24GB"),
}


def _spec(nvml_name: str, label: str, memory_bytes: int | None = None) -> AcceleratorSpec:
    peaks = _PEAKS_BY_NVML_NAME[nvml_name]
    memory = memory_bytes if memory_bytes else _MEMORY_GIB_BY_NVML_NAME[nvml_name] * GIB
    return AcceleratorSpec(label, memory, peaks.memory_bw_gbps, peaks.bf16_tflops, peaks.fp16_tflops,
                           source=f"catalog: NVIDIA datasheet of the {nvml_name}, dense peaks")


ACCELERATORS: dict[str, AcceleratorSpec] = {short: _spec(*names) for short, names in _SHORT_NAMES.items()}


def accelerator_names() -> list[str]:
    """The short names :func:`accelerator` knows, for ``--help`` and error messages."""
    return list(ACCELERATORS)


def find_accelerator(name: str) -> AcceleratorSpec | None:
    """The catalog entry called ``name`` (case and surrounding blanks ignored), or None."""
    return ACCELERATORS.get(name.strip().lower())


def accelerator(name: str) -> AcceleratorSpec:
    """The catalog entry called ``name``; a ConfigurationError listing the known names otherwise."""
    spec = find_accelerator(name)
    if spec is None:
        raise ConfigurationError(f"unknown accelerator {name!r}; known: {', '.join(accelerator_names())}")
    return spec


def accelerator_for_gpu(nvml_name: str, memory_bytes: int | None = None) -> AcceleratorSpec | None:
    """The spec of the GPU NVML calls ``nvml_name`` (with its memory as NVML reported it, when
    given), or None for a GPU the catalog does not know."""
    name = nvml_name.strip()
    return _spec(name, name, memory_bytes) if name in _PEAKS_BY_NVML_NAME else None
