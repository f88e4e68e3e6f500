import json
import sys

import pytest
import torch

from autotune.errors import ConfigurationError, ProbeError
from autotune.hardware import PROBE_METHOD_VERSION, HardwareProfile, cpu, gpu, probe_hardware


@pytest.fixture
def tiny_cpu_sizes(monkeypatch, tiny_sizes):
    """Dispatch tests need the CPU probe's shape, not its accuracy."""
    monkeypatch.setattr(cpu, "QUICK_SIZES", tiny_sizes)
    monkeypatch.setattr(cpu, "FULL_SIZES", tiny_sizes)


@pytest.fixture
def install_nvml(monkeypatch, fake_nvml):
    """Make ``import pynvml`` inside the probe return a fake module built from the given GPUs."""

    def install(gpus, init_fails=False):
        module = fake_nvml(gpus, init_fails=init_fails)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    return install


def assert_measured(profile: HardwareProfile):
    assert profile.metrics
    for metric in profile.metrics:
        assert metric.measured is not None and metric.measured > 0, metric


class TestRealCpuProbe:
    def test_quick_probe_measures_this_machine(self):
        steps = []
        profile = probe_hardware(quick=True, device="cpu", progress=steps.append)
        assert profile.device_type == "cpu"
        assert profile.quick is True
        assert profile.method_version == PROBE_METHOD_VERSION
        assert profile.duration_s > 0
        assert {m.name for m in profile.metrics} == {"memory_bw_gbps", "matmul_fp32_gflops", "launch_overhead_us"}
        assert_measured(profile)
        assert profile.memory_bw_gbps > 0
        assert profile.memory_total_bytes > 1 << 28
        assert profile.name.startswith("cpu: ")
        assert "measuring memory bandwidth" in steps
        restored = HardwareProfile.from_dict(json.loads(json.dumps(profile.to_dict())))
        assert restored == profile

    def test_full_probe_measures_this_machine_with_the_same_fingerprint(self):
        quick = probe_hardware(quick=True, device="cpu")
        full = probe_hardware(quick=False, device="cpu")
        assert full.quick is False
        assert_measured(full)
        assert full.fingerprint == quick.fingerprint
        matmul = full.metric("matmul_fp32_gflops")
        if matmul.peak is not None:  # derivable on x86 only
            assert 0 < matmul.ratio


def test_forcing_the_cpu_leaves_nvml_alone(install_nvml, fake_gpu, tiny_cpu_sizes):
    nvml = install_nvml([fake_gpu()])
    profile = probe_hardware(quick=True, device="cpu")
    assert profile.device_type == "cpu"
    assert nvml.calls == []
    assert "notes" not in profile.spec


def test_without_nvml_library_falls_back_to_the_cpu(install_nvml, tiny_cpu_sizes):
    nvml = install_nvml([], init_fails=True)
    profile = probe_hardware(quick=True)
    assert profile.device_type == "cpu"
    assert nvml.calls == ["init"]
    assert "NVML Shared Library Not Found" in profile.spec["notes"][0]
    assert "nvml_gpus" not in profile.spec
    assert_measured(profile)


def test_without_pynvml_package_falls_back_to_the_cpu(monkeypatch, tiny_cpu_sizes):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    profile = probe_hardware(quick=True)
    assert profile.device_type == "cpu"
    assert "nvidia-ml-py" in profile.spec["notes"][0]


def test_nvml_without_gpus_falls_back_to_the_cpu(install_nvml, tiny_cpu_sizes):
    install_nvml([])
    profile = probe_hardware(quick=True)
    assert profile.device_type == "cpu"
    assert "no NVIDIA GPU" in profile.spec["notes"][0]


def test_gpus_torch_cannot_use_are_recorded_on_the_cpu_profile(install_nvml, fake_gpu, monkeypatch, tiny_cpu_sizes):
    install_nvml([fake_gpu(), fake_gpu(uuid="GPU-2")])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    profile = probe_hardware(quick=True)
    assert profile.device_type == "cpu"
    assert [d["name"] for d in profile.spec["nvml_gpus"]] == ["NVIDIA H100 80GB HBM3"] * 2
    assert profile.spec["nvml_gpus"][0]["peak_bw_gbps"] == pytest.approx(3352.32)
    assert "2 NVIDIA GPU(s)" in profile.spec["notes"][0] and "CUDA build of torch" in profile.spec["notes"][0]
    assert profile.fingerprint == probe_hardware(quick=True, device="cpu").fingerprint
    json.dumps(profile.to_dict())


@pytest.fixture
def cuda_on_the_cpu(monkeypatch, fixed_target, tiny_sizes):
    """torch claims CUDA; the 'CUDA' benchmarks run on CPU tensors with the fixed timer."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gpu, "cuda_bench_target", lambda torch_module, quick: fixed_target)
    monkeypatch.setattr(gpu, "QUICK_SIZES", tiny_sizes)
    monkeypatch.setattr(gpu, "FULL_SIZES", tiny_sizes)


@pytest.mark.parametrize("device", ["auto", "cuda"])
def test_gpu_is_probed_when_nvml_and_torch_cuda_work(install_nvml, fake_gpu, cuda_on_the_cpu, device):
    nvml = install_nvml([fake_gpu()])
    steps = []
    profile = probe_hardware(quick=True, device=device, progress=steps.append)
    assert profile.device_type == "cuda"
    assert profile.name == "1x NVIDIA H100 80GB HBM3"
    assert profile.quick is True
    assert profile.duration_s > 0
    assert profile.metric("copy_bw_gbps").ratio > 0
    assert nvml.calls == ["init", "shutdown"]
    assert steps[0] == "reading NVIDIA GPUs through NVML"
    assert "notes" not in profile.spec


def test_gpu_fingerprint_stable_across_probes(install_nvml, fake_gpu, cuda_on_the_cpu):
    install_nvml([fake_gpu()])
    first = probe_hardware(quick=True)
    install_nvml([fake_gpu(free=10 << 30)])
    assert probe_hardware(quick=False).fingerprint == first.fingerprint


def test_forcing_cuda_without_a_usable_gpu_says_why(install_nvml, fake_gpu, monkeypatch):
    install_nvml([fake_gpu()])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ProbeError, match="CUDA build of torch") as error:
        probe_hardware(device="cuda")
    assert "\n" not in str(error.value)


def test_forcing_cuda_without_nvml_says_why(install_nvml):
    install_nvml([], init_fails=True)
    with pytest.raises(ProbeError, match="NVML is unavailable"):
        probe_hardware(device="cuda")


def test_unknown_device_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="'tpu'.*auto, cpu, cuda"):
        probe_hardware(device="tpu")


def test_a_failing_benchmark_is_a_one_line_probe_error_naming_the_step(monkeypatch, tiny_cpu_sizes):
    def out_of_memory(*args):
        raise RuntimeError("DefaultCPUAllocator: not enough memory\nfull traceback details")

    monkeypatch.setattr(cpu, "matmul_flops_per_s", out_of_memory)
    with pytest.raises(ProbeError) as error:
        probe_hardware(quick=True, device="cpu")
    message = str(error.value)
    assert "measuring fp32 matmul throughput" in message
    assert "not enough memory" in message
    assert "\n" not in message


def test_identify_hardware_matches_the_probe_without_benchmarking() -> None:
    from autotune.hardware import identify_hardware

    fingerprint, name = identify_hardware()
    profile = probe_hardware(quick=True)
    assert (fingerprint, name) == (profile.fingerprint, profile.name)
    assert identify_hardware("cpu") == (fingerprint, name) or profile.device_type == "cuda"


def test_identify_hardware_rejects_unknown_device() -> None:
    from autotune.hardware import identify_hardware

    with pytest.raises(ConfigurationError):
        identify_hardware("tpu")
