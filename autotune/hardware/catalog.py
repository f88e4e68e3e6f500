"""Published peak specs of common NVIDIA data-centre GPUs, keyed by the name NVML reports.

NVML gives memory clock and bus width (hence peak bandwidth) but no tensor-core throughput, so
the probe looks TFLOP/s peaks up here.  Figures are NVIDIA datasheet values for *dense* math
(the datasheets' headline numbers assume 2:4 sparsity and are twice these); unknown GPUs get
``None`` peaks rather than a guess.
"""

from __future__ import annotations

from dataclasses import dataclass


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
