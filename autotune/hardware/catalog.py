"""Published specs of common NVIDIA data-centre GPUs: by the name NVML reports (the probe's peaks)
and by a short name (``autotune plan --hardware h200``: what-if for hardware you do not have).

NVML gives memory clock and bus width (hence peak bandwidth) but no tensor-core throughput, so
the probe looks TFLOP/s peaks up here.  Figures are NVIDIA datasheet values for *dense* math
(the datasheets' headline numbers assume 2:4 sparsity and are twice these); unknown GPUs get
``None`` peaks rather than a guess.

Memory sizes are the datasheets' capacities, which for HBM parts are binary (NVML reports 81,559
MiB for an "80 GB" H100 and 143,771 MiB for a "141 GB" H200), so they are counted in GiB here.

GDDR parts (L40S, L4, A10) are the exception: their capacity is what NVML reports (the ECC
reservation and the driver's carve-out make an "48 GB" L40S 46,068 MiB), so they are counted in MiB.

FP8 and FP4 peaks are the same datasheets' dense tensor-core figures (None where the architecture
has no such tensor cores: FP8 from Ada/Hopper on, FP4 from Blackwell on). ``interconnect_gbps`` is
the GPU-to-GPU bandwidth, both directions together as the datasheets quote it (NVLink; the PCIe
link for parts without NVLink), which the roofline charges tensor parallelism's all-reduces at.

Launch overhead (an assumption from documented figures, not a datasheet value and not fitted):
every kernel of a forward pass costs at least ``KERNEL_LATENCY_US`` whatever bytes it reads — the
gap between two kernels of a CUDA graph plus the kernel's own ramp-up and tail (block scheduling,
a few dependent DRAM round trips). At decode, with 1-4 tokens per row, most kernels read a few MB
and finish in less than that, so a step is bounded below by kernels x this latency
(:mod:`autotune.perfmodel.roofline` counts the kernels of a layer by architecture). The per-pass
overhead of a serving engine (scheduling, sampling, the graph launch) is the engine's: see
:mod:`autotune.perfmodel.calibration`; ``PASS_OVERHEAD_US`` is the ideal CUDA-graph floor, the
default where no engine is named. MTP modules run inside the target's graph, so they pay the
per-kernel part only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from autotune.errors import NotFoundError

GIB = 1 << 30
MIB = 1 << 20
PASS_OVERHEAD_US = 20.0  # per forward pass: CUDA-graph launch, sampling, step bookkeeping (assumed)
# Per kernel inside a CUDA graph (module doc): a small kernel's launch-to-completion time with CUDA
# graphs is 2-5 us on data-centre GPUs (a graph node's launch gap of ~1 us, NVIDIA's "Getting
# Started with CUDA Graphs" blog, developer.nvidia.com/blog/cuda-graphs; a stream launch costs
# 4-6 us, which graphs mostly remove; plus the ramp and tail of a kernel that must stream from HBM).
# The midpoint of that range, assumed for every CUDA GPU and engine alike (all capture decode in
# CUDA graphs): 3.5 us. Taken from these figures, not fitted to any validation case.
KERNEL_LATENCY_US = 3.5


@dataclass(frozen=True)
class GpuPeaks:
    memory_bw_gbps: float
    bf16_tflops: float  # dense tensor-core, fp32 accumulate
    fp16_tflops: float  # dense tensor-core, fp32 accumulate
    fp8_tflops: float | None = None  # dense tensor-core (None: no FP8 tensor cores)
    fp4_tflops: float | None = None  # dense tensor-core (None: no FP4 tensor cores)
    interconnect_gbps: float | None = None  # GPU-to-GPU, both directions (module doc)


def _same(bw_gbps: float, half_tflops: float, fp8: float | None = None, fp4: float | None = None,
          link_gbps: float | None = None) -> GpuPeaks:
    # On these architectures bf16 and fp16 tensor-core rates are equal.
    return GpuPeaks(bw_gbps, half_tflops, half_tflops, fp8, fp4, link_gbps)


# Dense peaks: the datasheets' sparse figures halved. Sources, per family:
# - B200: NVIDIA HGX B200 / DGX B200 datasheets (per GPU: 8 TB/s, FP4 9 PF, FP8 4.5 PF, BF16 2.25 PF
#   dense; 5th-gen NVLink 1.8 TB/s).
# - B300: NVIDIA HGX B300 datasheet (per GPU: 288 GB HBM3e, 8 TB/s, dense FP4 13.5 PF = 108 PF / 8,
#   FP8 4.5 PF, BF16 2.25 PF; NVLink 1.8 TB/s).
# - GB200: NVIDIA GB200 NVL72 datasheet divided by its 72 GPUs (186 GB HBM3e, 8 TB/s, dense FP4 10 PF,
#   FP8 5 PF, BF16 2.5 PF; NVLink 1.8 TB/s).
# - H100 / H200 / GH200: NVIDIA H100, H200 and GH200 Grace Hopper datasheets (SXM: BF16 989.4,
#   FP8 1978.9 TFLOP/s dense; NVLink 900 GB/s; NVL: 835.5 / 1670.5; PCIe: 756 / 1513, NVLink
#   bridge 600 GB/s). GH200 with 144 GB HBM3e: 4.9 TB/s.
# - H20: NVIDIA H20 product brief as published by OEMs (96 GB HBM3, 4.0 TB/s, FP16/BF16 148 and FP8
#   296 TFLOP/s dense, NVLink 900 GB/s).
# - A100: A100 datasheet (no FP8; NVLink 600 GB/s; PCIe with a bridge 600 GB/s).
# - L40S, L4 (Ada: FP8 733 and 242.5 dense; PCIe Gen4 x16, 64 GB/s), A10 (no FP8; PCIe Gen4 64 GB/s).
_PEAKS_BY_NVML_NAME: dict[str, GpuPeaks] = {
    "NVIDIA B200": _same(8000.0, 2250.0, 4500.0, 9000.0, 1800.0),
    "NVIDIA B300": _same(8000.0, 2250.0, 4500.0, 13500.0, 1800.0),
    "NVIDIA GB200": _same(8000.0, 2500.0, 5000.0, 10000.0, 1800.0),
    "NVIDIA GH200 144G HBM3e": _same(4900.0, 989.4, 1978.9, None, 900.0),
    "NVIDIA H200": _same(4800.0, 989.4, 1978.9, None, 900.0),  # SXM
    "NVIDIA H200 NVL": _same(4800.0, 835.5, 1670.5, None, 900.0),
    "NVIDIA H100 80GB HBM3": _same(3350.0, 989.4, 1978.9, None, 900.0),  # SXM5
    "NVIDIA H100 NVL": _same(3900.0, 835.5, 1670.5, None, 600.0),
    "NVIDIA H100 PCIe": _same(2000.0, 756.0, 1513.0, None, 600.0),
    "NVIDIA H20": _same(4000.0, 148.0, 296.0, None, 900.0),
    "NVIDIA A100-SXM4-80GB": _same(2039.0, 312.0, None, None, 600.0),
    "NVIDIA A100-SXM4-40GB": _same(1555.0, 312.0, None, None, 600.0),
    "NVIDIA A100 80GB PCIe": _same(1935.0, 312.0, None, None, 600.0),
    "NVIDIA A100-PCIE-40GB": _same(1555.0, 312.0, None, None, 600.0),
    "NVIDIA L40S": _same(864.0, 362.05, 733.0, None, 64.0),
    "NVIDIA L4": _same(300.0, 121.0, 242.5, None, 64.0),
    "NVIDIA A10": _same(600.0, 125.0, None, None, 64.0),
}


def gpu_peaks(name: str) -> GpuPeaks | None:
    """Peaks of the GPU NVML calls ``name`` (exact match: "NVIDIA A10" is not an A100), or ``None``."""
    return _PEAKS_BY_NVML_NAME.get(name.strip())


# -- accelerators by short name (what-if planning) ----------------------------------------------------


# Bytes per element of each compute dtype. NVFP4 stores one FP8 scale per 16 FP4 values: 0.5 + 1/16.
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5 + 1 / 16}


@dataclass(frozen=True)
class AcceleratorSpec:
    """What the roofline needs of one device: memory, bandwidth, peak FLOP/s at the compute dtype,
    and the assumed overheads (see the module doc). ``source`` says where the figures come from.

    ``tp`` GPUs of this kind serve one model replica (tensor parallelism; ``memory_bytes`` is one
    GPU's). ``bandwidth_fraction`` and ``gemm_fraction`` are the shares of the peaks the kernels
    reach (1.0: the peaks themselves; :mod:`autotune.perfmodel.calibration` sets them and says why
    in ``calibration``, naming in ``calibrated_from`` the stored cost profile it fitted, if any)."""

    name: str
    memory_bytes: int
    memory_bw_gbps: float
    bf16_tflops: float | None
    fp16_tflops: float | None
    fp32_tflops: float | None = None
    dtype: str = "bf16"  # the compute dtype of weights and activations
    pass_overhead_us: float = PASS_OVERHEAD_US
    kernel_latency_us: float = KERNEL_LATENCY_US
    device_type: str = "cuda"
    source: str = "catalog"
    fp8_tflops: float | None = None
    fp4_tflops: float | None = None
    interconnect_gbps: float | None = None
    tp: int = 1
    bandwidth_fraction: float = 1.0
    gemm_fraction: float = 1.0
    calibration: str = "none: datasheet peaks"
    calibrated_from: str | None = None  # the stored cost profile the overhead was fitted to, if any
    overhead_origin: str = "none"  # where pass_overhead_us comes from, in words (the step part of ``calibration``)

    def __post_init__(self) -> None:
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPE_BYTES)}, got {self.dtype!r}")
        if self.peak_tflops is None or self.peak_tflops <= 0 or self.memory_bw_gbps <= 0:
            raise ValueError(f"{self.name}: the roofline needs a bandwidth and a {self.dtype} FLOP/s peak")

    @property
    def peak_tflops(self) -> float | None:
        """Dense peak at the compute dtype."""
        return {"bf16": self.bf16_tflops, "fp16": self.fp16_tflops, "fp32": self.fp32_tflops,
                "fp8": self.fp8_tflops, "fp4": self.fp4_tflops}[self.dtype]

    @property
    def dtype_bytes(self) -> float:
        return DTYPE_BYTES[self.dtype]

    @property
    def achieved_bw_gbps(self) -> float:
        return self.memory_bw_gbps * self.bandwidth_fraction

    @property
    def achieved_tflops(self) -> float:
        return float(self.peak_tflops or 0.0) * self.gemm_fraction

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "peak_tflops": self.peak_tflops, "dtype_bytes": self.dtype_bytes}


# Memory per GPU in GiB (module doc), from the same datasheets as the peaks.
_MEMORY_GIB_BY_NVML_NAME: dict[str, int] = {
    # B200: the DGX/HGX B200 datasheets give 1,440 GB for 8 GPUs, 180 GB HBM3e per GPU (early
    # announcements said 192 GB); 8 TB/s and 4.5 PFLOP/s sparse, 2.25 dense, FP16/BF16.
    "NVIDIA B200": 180,
    "NVIDIA B300": 288,
    "NVIDIA GB200": 186,
    "NVIDIA GH200 144G HBM3e": 144,
    "NVIDIA H200": 141,
    "NVIDIA H200 NVL": 141,
    "NVIDIA H100 80GB HBM3": 80,
    "NVIDIA H100 NVL": 94,
    "NVIDIA H100 PCIe": 80,
    "NVIDIA H20": 96,
    "NVIDIA A100-SXM4-80GB": 80,
    "NVIDIA A100-SXM4-40GB": 40,
    "NVIDIA A100 80GB PCIe": 80,
    "NVIDIA A100-PCIE-40GB": 40,
}
# GDDR parts: the capacity NVML reports (module doc; nvidia-smi's "Total" on each part).
_MEMORY_MIB_BY_NVML_NAME: dict[str, int] = {
    "NVIDIA L40S": 46_068,
    "NVIDIA L4": 23_034,
    "NVIDIA A10": 23_028,
}
# Short name -> (NVML name, display name).
_SHORT_NAMES: dict[str, tuple[str, str]] = {
    "h100-sxm": ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM 80GB"),
    "h100-pcie": ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe 80GB"),
    "h100-nvl": ("NVIDIA H100 NVL", "NVIDIA H100 NVL 94GB"),
    "h200": ("NVIDIA H200", "NVIDIA H200 SXM 141GB"),
    "h200-nvl": ("NVIDIA H200 NVL", "NVIDIA H200 NVL 141GB"),
    "b200": ("NVIDIA B200", "NVIDIA B200 180GB"),
    "b300": ("NVIDIA B300", "NVIDIA B300 288GB"),
    "gb200": ("NVIDIA GB200", "NVIDIA GB200 186GB"),
    "gh200": ("NVIDIA GH200 144G HBM3e", "NVIDIA GH200 144GB HBM3e"),
    "h20": ("NVIDIA H20", "NVIDIA H20 96GB"),
    "a100-80gb": ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM 80GB"),
    "a100-40gb": ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 SXM 40GB"),
    "l40s": ("NVIDIA L40S", "NVIDIA L40S 48GB"),
    "l4": ("NVIDIA L4", "NVIDIA L4 24GB"),
    "a10": ("NVIDIA A10", "NVIDIA A10 24GB"),
}


def _spec(nvml_name: str, label: str, memory_bytes: int | None = None) -> AcceleratorSpec:
    peaks = _PEAKS_BY_NVML_NAME[nvml_name]
    memory = memory_bytes or (_MEMORY_MIB_BY_NVML_NAME[nvml_name] * MIB if nvml_name in _MEMORY_MIB_BY_NVML_NAME
                              else _MEMORY_GIB_BY_NVML_NAME[nvml_name] * GIB)
    return AcceleratorSpec(label, memory, peaks.memory_bw_gbps, peaks.bf16_tflops, peaks.fp16_tflops,
                           source=f"catalog: NVIDIA datasheet of the {nvml_name}, dense peaks",
                           fp8_tflops=peaks.fp8_tflops, fp4_tflops=peaks.fp4_tflops,
                           interconnect_gbps=peaks.interconnect_gbps)


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
        raise NotFoundError(f"unknown accelerator {name!r}; known: {', '.join(accelerator_names())}")
    return spec


def accelerator_for_gpu(nvml_name: str, memory_bytes: int | None = None) -> AcceleratorSpec | None:
    """The spec of the GPU NVML calls ``nvml_name`` (with its memory as NVML reported it, when
    given), or None for a GPU the catalog does not know."""
    name = nvml_name.strip()
    return _spec(name, name, memory_bytes) if name in _PEAKS_BY_NVML_NAME else None


def catalog_nvml_name(name: str) -> str | None:
    """The name NVML gives the catalog entry called ``name`` (how a stored probe of that GPU model
    is recognised), or None."""
    entry = _SHORT_NAMES.get(name.strip().lower())
    return entry[0] if entry else None
