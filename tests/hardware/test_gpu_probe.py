import json
import types
from dataclasses import replace

import pytest

from autotune.hardware import gpu
from autotune.hardware.profile import HardwareProfile

H100_UUID = "GPU-00000000-1111-2222-3333-444444444444"


def test_peak_bandwidth_from_memory_clock_and_bus_width():
    assert gpu.peak_bandwidth_gbps(2619, 5120) == pytest.approx(3352.32)  # H100 SXM, HBM3
    assert gpu.peak_bandwidth_gbps(6251, 384) == pytest.approx(600.1, abs=0.1)  # A10, GDDR6


class TestReadNvml:
    def test_reads_every_device_and_the_driver(self, fake_nvml, fake_gpu):
        nvml = fake_nvml([fake_gpu(), fake_gpu(uuid="GPU-other")])
        snapshot = gpu.read_nvml(nvml)
        assert len(snapshot.devices) == 2
        device = snapshot.devices[0]
        assert device.index == 0 and snapshot.devices[1].index == 1
        assert device.name == "NVIDIA H100 80GB HBM3"
        assert device.memory_total_bytes == 81559 << 20
        assert device.memory_free_bytes == 80000 << 20
        assert device.compute_capability == "9.0"
        assert (device.sm_clock_mhz, device.mem_clock_mhz, device.mem_bus_width_bits) == (1980, 2619, 5120)
        assert device.peak_bw_gbps == pytest.approx(3352.32)
        assert device.uuid == H100_UUID
        assert snapshot.driver_version == "550.54.15"
        assert snapshot.cuda_driver_version == "12.4"
        assert nvml.calls == ["init", "shutdown"]

    def test_decodes_bytes_from_older_pynvml(self, fake_nvml, fake_gpu):
        snapshot = gpu.read_nvml(fake_nvml([fake_gpu(name=b"NVIDIA L4")]))
        assert snapshot.devices[0].name == "NVIDIA L4"

    def test_unsupported_queries_give_none(self, fake_nvml, fake_gpu):
        nvml = fake_nvml([fake_gpu(unsupported={"bus_width", "capability", "uuid", "clock"})])
        device = gpu.read_nvml(nvml).devices[0]
        assert device.mem_bus_width_bits is None
        assert device.compute_capability is None
        assert device.uuid is None
        assert device.sm_clock_mhz is None and device.mem_clock_mhz is None
        assert device.peak_bw_gbps is None

    def test_a_failing_required_query_propagates_and_still_shuts_nvml_down(self, fake_nvml, fake_gpu):
        nvml = fake_nvml([fake_gpu(unsupported={"memory"})])
        with pytest.raises(nvml.NVMLError):
            gpu.read_nvml(nvml)
        assert nvml.calls == ["init", "shutdown"]

    def test_init_failure_propagates(self, fake_nvml):
        nvml = fake_nvml([], init_fails=True)
        with pytest.raises(nvml.NVMLError_LibraryNotFound):
            gpu.read_nvml(nvml)


class TestIdentity:
    def test_fingerprint_is_stable_across_reads_and_identical_nodes(self, fake_nvml, fake_gpu):
        node_a = gpu.read_nvml(fake_nvml([fake_gpu(), fake_gpu()])).devices
        node_a_again = gpu.read_nvml(fake_nvml([fake_gpu(), fake_gpu()])).devices
        node_b = gpu.read_nvml(fake_nvml([fake_gpu(uuid="GPU-b1", free=1 << 30), fake_gpu(uuid="GPU-b2")])).devices
        assert gpu.gpu_identity(node_a) == gpu.gpu_identity(node_a_again) == gpu.gpu_identity(node_b)

    def test_fingerprint_changes_with_count_model_or_memory(self, fake_nvml, fake_gpu):
        def identity(*gpus):
            return gpu.gpu_identity(gpu.read_nvml(fake_nvml(list(gpus))).devices)

        base = identity(fake_gpu(), fake_gpu())
        assert identity(fake_gpu()) != base
        assert identity(fake_gpu(), fake_gpu(name="NVIDIA H200")) != base
        assert identity(fake_gpu(), fake_gpu(total=96 << 30)) != base

    def test_device_order_does_not_matter(self, fake_nvml, fake_gpu):
        l4, h100 = fake_gpu(name="NVIDIA L4", total=23 << 30), fake_gpu()
        assert (gpu.gpu_identity(gpu.read_nvml(fake_nvml([l4, h100])).devices)
                == gpu.gpu_identity(gpu.read_nvml(fake_nvml([h100, l4])).devices))

    def test_names(self, fake_nvml, fake_gpu):
        assert gpu.gpu_name(gpu.read_nvml(fake_nvml([fake_gpu()] * 8)).devices) == "8x NVIDIA H100 80GB HBM3"
        mixed = gpu.read_nvml(fake_nvml([fake_gpu(name="NVIDIA L4"), fake_gpu(name="NVIDIA A10")])).devices
        assert gpu.gpu_name(mixed) == "1x NVIDIA A10 + 1x NVIDIA L4"


class TestBenchmarkedIndex:
    def test_matches_torch_uuid_with_or_without_prefix(self, fake_nvml, fake_gpu):
        devices = gpu.read_nvml(fake_nvml([fake_gpu(uuid="GPU-aaa"), fake_gpu(uuid="GPU-bbb")])).devices
        assert gpu.benchmarked_index(devices, "bbb") == 1
        assert gpu.benchmarked_index(devices, "GPU-bbb") == 1

    def test_defaults_to_the_first_device(self, fake_nvml, fake_gpu):
        devices = gpu.read_nvml(fake_nvml([fake_gpu(uuid="GPU-aaa"), fake_gpu(uuid="GPU-bbb")])).devices
        assert gpu.benchmarked_index(devices, None) == 0
        assert gpu.benchmarked_index(devices, "MIG-ccc") == 0


def test_cuda_bench_target_times_cuda0_with_events_and_carries_its_uuid():
    props = types.SimpleNamespace(uuid="00000000-1111")
    cuda = types.SimpleNamespace(get_device_properties=lambda device: props)
    target = gpu.cuda_bench_target(types.SimpleNamespace(cuda=cuda), quick=True)
    assert target.device == "cuda:0"
    assert target.device_uuid == "00000000-1111"
    assert target.repeats == gpu.QUICK_REPEATS


class TestProbeGpu:
    def probe(self, snapshot, target, sizes) -> HardwareProfile:
        return gpu.probe_gpu(snapshot, target, sizes, quick=False, progress=lambda _: None)

    def test_metrics_next_to_nvml_and_catalog_peaks(self, fake_nvml, fake_gpu, fixed_target, tiny_sizes, fixed_seconds):
        snapshot = gpu.read_nvml(fake_nvml([fake_gpu(), fake_gpu(uuid="GPU-2")]))
        profile = self.probe(snapshot, fixed_target, tiny_sizes)
        assert profile.device_type == "cuda"
        assert profile.device_count == 2
        assert profile.name == "2x NVIDIA H100 80GB HBM3"
        copy = profile.metric("copy_bw_gbps")
        assert copy.measured == pytest.approx(2 * tiny_sizes.copy_bytes / fixed_seconds / 1e9)
        assert copy.peak == pytest.approx(3352.32)  # from NVML's clock and bus width
        assert copy.ratio == pytest.approx(copy.measured / 3352.32)
        for dtype in ("bf16", "fp16"):
            matmul = profile.metric(f"matmul_{dtype}_tflops")
            assert matmul.measured == pytest.approx(2 * tiny_sizes.matmul_n**3 / fixed_seconds / 1e12)
            assert matmul.peak == 989.4  # from the catalog
        assert profile.metric("launch_overhead_us").measured == pytest.approx(fixed_seconds * 1e6)
        assert profile.memory_total_bytes == 81559 << 20
        assert profile.memory_bw_gbps == copy.measured
        assert profile.spec["cuda_driver_version"] == "12.4"
        assert profile.spec["benchmarked_device"] == 0
        assert "cpu_model" in profile.spec["host_cpu"]
        json.dumps(profile.to_dict())

    def test_fingerprint_stable_across_runs(self, fake_nvml, fake_gpu, fixed_target, tiny_sizes):
        first = self.probe(gpu.read_nvml(fake_nvml([fake_gpu()])), fixed_target, tiny_sizes)
        second = self.probe(gpu.read_nvml(fake_nvml([fake_gpu(free=1 << 30)])), fixed_target, tiny_sizes)
        assert first.fingerprint == second.fingerprint
        assert len(first.fingerprint) == 16

    def test_peak_bandwidth_from_catalog_when_nvml_lacks_it(self, fake_nvml, fake_gpu, fixed_target, tiny_sizes):
        snapshot = gpu.read_nvml(fake_nvml([fake_gpu(unsupported={"bus_width"})]))
        assert self.probe(snapshot, fixed_target, tiny_sizes).peak_memory_bw_gbps == 3350.0

    def test_unknown_gpu_has_no_compute_peak(self, fake_nvml, fake_gpu, fixed_target, tiny_sizes):
        snapshot = gpu.read_nvml(fake_nvml([fake_gpu(name="NVIDIA Future GPU")]))
        profile = self.probe(snapshot, fixed_target, tiny_sizes)
        assert profile.metric("matmul_bf16_tflops").peak is None
        assert profile.metric("matmul_bf16_tflops").ratio is None
        assert profile.metric("copy_bw_gbps").peak == pytest.approx(3352.32)

    def test_peaks_and_memory_come_from_the_benchmarked_device(self, fake_nvml, fake_gpu, fixed_target, tiny_sizes):
        l4 = fake_gpu(name="NVIDIA L4", total=23034 << 20, mem_clock=6251, bus_width=192, uuid="GPU-l4")
        snapshot = gpu.read_nvml(fake_nvml([fake_gpu(), l4]))
        profile = self.probe(snapshot, replace(fixed_target, device_uuid="l4"), tiny_sizes)
        assert profile.spec["benchmarked_device"] == 1
        assert profile.memory_total_bytes == 23034 << 20
        assert profile.metric("matmul_bf16_tflops").peak == 121.0
        assert profile.peak_memory_bw_gbps == pytest.approx(300.0, abs=0.1)

    def test_copy_uses_at_most_a_quarter_of_free_memory(self, fake_nvml, fake_gpu, fixed_target, tiny_sizes,
                                                        fixed_seconds):
        snapshot = gpu.read_nvml(fake_nvml([fake_gpu(free=8000)]))
        profile = self.probe(snapshot, fixed_target, tiny_sizes)
        assert profile.memory_bw_gbps == pytest.approx(2 * 1000 / fixed_seconds / 1e9)  # 8000 // 8 bytes

    def test_reports_each_step(self, fake_nvml, fake_gpu, fixed_target, tiny_sizes):
        steps = []
        gpu.probe_gpu(gpu.read_nvml(fake_nvml([fake_gpu()])), fixed_target, tiny_sizes, quick=True,
                      progress=steps.append)
        assert steps == ["measuring device-to-device copy bandwidth", "measuring bf16 matmul throughput",
                         "measuring fp16 matmul throughput", "measuring kernel launch overhead"]

    def test_needs_a_device(self, fixed_target, tiny_sizes):
        with pytest.raises(ValueError, match="at least one GPU"):
            self.probe(gpu.NvmlSnapshot(devices=(), driver_version=None, cuda_driver_version=None),
                       fixed_target, tiny_sizes)
