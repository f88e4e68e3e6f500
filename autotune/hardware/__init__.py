"""Hardware probe: what the machine is and how fast it moves bytes and does math.

``probe_hardware()`` returns a :class:`HardwareProfile` (GPU through NVML + torch CUDA
micro-benchmarks, or the CPU as fallback); the store persists its ``to_dict()``. :mod:`.catalog`
holds the published specs of data-centre GPUs: the probe's peaks, and the accelerators ``autotune
plan`` can plan for.
"""

from autotune.hardware.probe import DEVICES, identify_hardware, probe_hardware
from autotune.hardware.profile import PROBE_METHOD_VERSION, DeviceInfo, HardwareProfile, Metric

__all__ = ["DEVICES", "PROBE_METHOD_VERSION", "DeviceInfo", "HardwareProfile", "Metric", "identify_hardware", "probe_hardware"]
