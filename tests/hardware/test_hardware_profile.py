import json
import math

import pytest

from autotune.hardware.profile import (
    PROBE_METHOD_VERSION,
    DeviceInfo,
    HardwareProfile,
    Metric,
    fingerprint_of,
    round_gib,
)

H100 = DeviceInfo(index=0, name="NVIDIA H100 80GB HBM3", memory_total_bytes=85_520_809_984,
                  memory_free_bytes=84_000_000_000, compute_capability="9.0", sm_clock_mhz=1980,
                  mem_clock_mhz=2619, mem_bus_width_bits=5120, peak_bw_gbps=3352.32, uuid="GPU-1")
L4 = DeviceInfo(index=1, name="NVIDIA L4", memory_total_bytes=24_152_899_584, memory_free_bytes=None,
                compute_capability="8.9", sm_clock_mhz=None, mem_clock_mhz=None, mem_bus_width_bits=None,
                peak_bw_gbps=None)


def gpu_profile(benchmarked_device: int = 0) -> HardwareProfile:
    return HardwareProfile(
        fingerprint="0123456789abcdef", name="1x NVIDIA H100 80GB HBM3 + 1x NVIDIA L4", device_type="cuda",
        device_count=2, spec={"devices": [H100.to_dict(), L4.to_dict()], "benchmarked_device": benchmarked_device},
        metrics=(Metric("copy_bw_gbps", "GB/s", 2900.0, 3352.32), Metric("matmul_bf16_tflops", "TFLOP/s", 700.0, 989.4),
                 Metric("launch_overhead_us", "us", 4.5)),
        quick=True, duration_s=3.2)


def cpu_profile(metrics: tuple[Metric, ...]) -> HardwareProfile:
    return HardwareProfile(fingerprint="fedcba9876543210", name="cpu: test", device_type="cpu", device_count=1,
                           spec={"ram_total_bytes": 16 << 30}, metrics=metrics)


class TestMetric:
    def test_ratio_is_measured_over_peak(self):
        assert Metric("m", "GB/s", 2.0, 8.0).ratio == 0.25

    @pytest.mark.parametrize("measured, peak", [(2.0, None), (None, 8.0), (None, None), (2.0, 0.0)])
    def test_ratio_is_none_without_both_values(self, measured, peak):
        assert Metric("m", "GB/s", measured, peak).ratio is None

    @pytest.mark.parametrize("measured, peak", [(-1.0, None), (math.nan, None), (1.0, math.inf), (1.0, -2.0)])
    def test_rejects_negative_or_non_finite_values(self, measured, peak):
        with pytest.raises(ValueError, match="metric m"):
            Metric("m", "GB/s", measured, peak)

    def test_dict_round_trip_carries_ratio_for_readers(self):
        metric = Metric("m", "GB/s", 3.0, 4.0)
        d = metric.to_dict()
        assert d["ratio"] == 0.75
        assert Metric.from_dict(d) == metric

    def test_from_dict_names_the_missing_key(self):
        with pytest.raises(ValueError, match="'measured'"):
            Metric.from_dict({"name": "m", "unit": "us"})


class TestDeviceInfo:
    def test_dict_round_trip(self):
        assert DeviceInfo.from_dict(H100.to_dict()) == H100
        assert DeviceInfo.from_dict(L4.to_dict()) == L4

    def test_from_dict_requires_identity_fields(self):
        d = H100.to_dict()
        del d["memory_total_bytes"]
        with pytest.raises(ValueError, match="memory_total_bytes"):
            DeviceInfo.from_dict(d)


class TestHardwareProfile:
    def test_json_round_trip_gives_an_equal_profile(self):
        profile = gpu_profile()
        restored = HardwareProfile.from_dict(json.loads(json.dumps(profile.to_dict())))
        assert restored == profile
        assert restored.method_version == PROBE_METHOD_VERSION

    def test_from_dict_names_the_missing_key(self):
        d = gpu_profile().to_dict()
        del d["fingerprint"]
        with pytest.raises(ValueError, match="'fingerprint'"):
            HardwareProfile.from_dict(d)

    def test_rejects_unknown_device_type(self):
        d = gpu_profile().to_dict() | {"device_type": "tpu"}
        with pytest.raises(ValueError, match="tpu"):
            HardwareProfile.from_dict(d)

    def test_metric_lookup(self):
        profile = gpu_profile()
        assert profile.metric("matmul_bf16_tflops").measured == 700.0
        assert profile.metric("matmul_fp32_gflops") is None

    def test_gpu_memory_is_the_benchmarked_device(self):
        assert gpu_profile(benchmarked_device=0).memory_total_bytes == H100.memory_total_bytes
        assert gpu_profile(benchmarked_device=1).memory_total_bytes == L4.memory_total_bytes

    def test_cpu_memory_is_ram(self):
        assert cpu_profile(()).memory_total_bytes == 16 << 30

    def test_bandwidth_reads_the_copy_metric_of_gpus(self):
        profile = gpu_profile()
        assert profile.memory_bw_gbps == 2900.0
        assert profile.peak_memory_bw_gbps == 3352.32

    def test_bandwidth_takes_the_best_measured_bandwidth_metric(self):
        profile = cpu_profile((Metric("memory_bw_gbps", "GB/s", 20.0), Metric("copy_bw_gbps", "GB/s", 12.0, 50.0)))
        assert profile.memory_bw_gbps == 20.0
        assert profile.peak_memory_bw_gbps is None

    def test_bandwidth_is_none_when_not_measured(self):
        profile = cpu_profile((Metric("memory_bw_gbps", "GB/s", None), Metric("launch_overhead_us", "us", 3.0)))
        assert profile.memory_bw_gbps is None
        assert profile.peak_memory_bw_gbps is None


def test_fingerprint_is_16_hex_chars_independent_of_key_order():
    a = fingerprint_of({"model": "x", "cores": 2})
    assert a == fingerprint_of({"cores": 2, "model": "x"})
    assert len(a) == 16 and int(a, 16) >= 0
    assert a != fingerprint_of({"model": "x", "cores": 4})


def test_round_gib_rounds_to_nearest():
    assert round_gib(81559 << 20) == 80  # H100 80GB reports 79.6 GiB
    assert round_gib(3 << 30) == 3
