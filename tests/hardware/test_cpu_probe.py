import pytest
import torch

from autotune.hardware import cpu
from autotune.hardware.cpu import CpuInfo, flops_per_cycle_fp32, parse_cpuinfo, read_cpu_spec

INTEL_TWO_SOCKETS = "\n\n".join(
    f"processor\t: {n}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n"
    f"model name\t: Intel(R) Xeon(R) Platinum 8480+\ncpu MHz\t\t: {mhz}\nphysical id\t: {socket}\n"
    f"core id\t\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw"
    for n, (socket, mhz) in enumerate([(0, 2000.0), (0, 3800.5), (1, 2000.0), (1, 2100.0)])  # 2 hyperthreads each
) + "\n"

ZEN4 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n"
        "cpu MHz\t\t: 2596.140\nphysical id\t: 0\ncore id\t\t: 0\nflags\t\t: sse2 avx avx2 fma avx512f\n\n")

ARM = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n\n"


def info(flags: str, vendor: str = "GenuineIntel", family: int = 6) -> CpuInfo:
    return CpuInfo(model="x", vendor=vendor, family=family, flags=frozenset(flags.split()), physical_cores=1, mhz=None)


class TestParseCpuinfo:
    def test_reads_model_flags_and_counts_physical_cores_not_hyperthreads(self):
        parsed = parse_cpuinfo(INTEL_TWO_SOCKETS)
        assert parsed.model == "Intel(R) Xeon(R) Platinum 8480+"
        assert parsed.vendor == "GenuineIntel"
        assert parsed.family == 6
        assert {"avx512f", "fma"} <= parsed.flags
        assert parsed.physical_cores == 2
        assert parsed.mhz == 3800.5

    def test_layout_without_x86_fields_gives_none(self):
        parsed = parse_cpuinfo(ARM)
        assert (parsed.model, parsed.vendor, parsed.family, parsed.physical_cores, parsed.mhz) == (None,) * 5
        assert parsed.flags == frozenset()

    def test_empty_text(self):
        assert parse_cpuinfo("").model is None


class TestFlopsPerCycle:
    @pytest.mark.parametrize("flags, expected", [
        ("sse2 avx avx2 fma avx512f", 64),  # two 512-bit FMA units
        ("sse2 avx avx2 fma", 32),
        ("sse2 avx", 8),
        ("sse2 avx2", 8),  # AVX2 without FMA
    ])
    def test_from_widest_fma(self, flags, expected):
        assert flops_per_cycle_fp32(info(flags), "x86_64") == expected

    def test_zen4_runs_avx512_at_half_rate(self):
        assert flops_per_cycle_fp32(parse_cpuinfo(ZEN4), "x86_64") == 32

    def test_zen5_runs_avx512_at_full_rate(self):
        assert flops_per_cycle_fp32(info("avx2 fma avx512f", "AuthenticAMD", 26), "x86_64") == 64

    def test_unknown_off_x86(self):
        assert flops_per_cycle_fp32(info("avx2 fma"), "aarch64") is None


class TestReadCpuSpec:
    def test_peak_from_cores_max_clock_and_flops_per_cycle(self, tmp_path, monkeypatch):
        monkeypatch.setattr(cpu.platform, "machine", lambda: "x86_64")
        (tmp_path / "cpuinfo").write_text(INTEL_TWO_SOCKETS)
        (tmp_path / "max_freq").write_text("3500000\n")  # kHz
        spec = read_cpu_spec(tmp_path / "cpuinfo", tmp_path / "max_freq")
        assert spec["cpu_model"] == "Intel(R) Xeon(R) Platinum 8480+"
        assert spec["physical_cores"] == 2
        assert spec["max_mhz"] == 3500.0
        assert spec["flops_per_cycle_fp32"] == 64
        assert spec["peak_fp32_gflops"] == pytest.approx(2 * 3500e6 * 64 / 1e9)

    def test_falls_back_to_cpuinfo_mhz_without_cpufreq(self, tmp_path, monkeypatch):
        monkeypatch.setattr(cpu.platform, "machine", lambda: "x86_64")
        (tmp_path / "cpuinfo").write_text(ZEN4)
        spec = read_cpu_spec(tmp_path / "cpuinfo", tmp_path / "missing")
        assert spec["max_mhz"] == 2596.14
        assert spec["peak_fp32_gflops"] == pytest.approx(1 * 2596.14e6 * 32 / 1e9)

    def test_without_cpuinfo_names_the_cpu_by_platform_and_has_no_peak(self, tmp_path, monkeypatch):
        monkeypatch.setattr(cpu.platform, "machine", lambda: "aarch64")
        monkeypatch.setattr(cpu.platform, "processor", lambda: "")
        spec = read_cpu_spec(tmp_path / "missing", tmp_path / "missing")
        assert spec["cpu_model"] == "aarch64"
        assert spec["physical_cores"] == spec["logical_cores"] >= 1
        assert spec["peak_fp32_gflops"] is None
        assert spec["ram_total_bytes"] > 0

    def test_this_machine(self):
        spec = read_cpu_spec()
        assert spec["cpu_model"]
        assert 1 <= spec["physical_cores"] <= spec["logical_cores"]
        assert spec["ram_total_bytes"] > 1 << 28


def test_probe_cpu_reports_measured_metrics_against_the_spec_peak(fixed_target, tiny_sizes, fixed_seconds):
    steps = []
    profile = cpu.probe_cpu(fixed_target, tiny_sizes, quick=True, progress=steps.append)
    assert profile.device_type == "cpu"
    assert profile.quick is True
    assert profile.memory_bw_gbps == pytest.approx(2 * tiny_sizes.copy_bytes / fixed_seconds / 1e9)
    assert profile.peak_memory_bw_gbps is None  # not derivable for CPUs: never invented
    matmul = profile.metric("matmul_fp32_gflops")
    assert matmul.measured == pytest.approx(2 * tiny_sizes.matmul_n**3 / fixed_seconds / 1e9)
    assert matmul.peak == profile.spec["peak_fp32_gflops"]
    assert profile.metric("launch_overhead_us").measured == pytest.approx(fixed_seconds * 1e6)
    assert profile.memory_total_bytes == profile.spec["ram_total_bytes"]
    assert profile.spec["torch_version"] == str(torch.__version__)
    assert steps == ["reading cpu spec", "measuring memory bandwidth", "measuring fp32 matmul throughput",
                     "measuring op launch overhead"]


def test_fingerprint_is_the_identity_not_the_measurements(fixed_target, tiny_sizes):
    first = cpu.probe_cpu(fixed_target, tiny_sizes, quick=True, progress=lambda _: None)
    second = cpu.probe_cpu(fixed_target, tiny_sizes.__class__(8192, 16, 5), quick=False, progress=lambda _: None)
    assert first.metrics != second.metrics
    assert first.fingerprint == second.fingerprint


def test_identity_changes_with_the_hardware():
    spec = {"cpu_model": "AMD EPYC", "logical_cores": 2, "ram_total_bytes": 24 << 30, "arch": "x86_64"}
    assert cpu.cpu_identity(spec) == cpu.cpu_identity(spec | {"ram_total_bytes": (24 << 30) + (100 << 20)})
    for change in ({"logical_cores": 4}, {"ram_total_bytes": 48 << 30}, {"cpu_model": "Intel"}, {"arch": "aarch64"}):
        assert cpu.cpu_identity(spec) != cpu.cpu_identity(spec | change)


def test_name_is_readable():
    spec = {"cpu_model": "AMD EPYC", "logical_cores": 2, "ram_total_bytes": 24 << 30}
    assert cpu.cpu_name(spec) == "cpu: AMD EPYC (2 cores, 24 GiB)"
