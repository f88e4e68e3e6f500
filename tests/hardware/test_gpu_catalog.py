import pytest

from autotune.hardware.catalog import gpu_peaks


def test_h100_sxm_peaks_are_dense_datasheet_values():
    peaks = gpu_peaks("NVIDIA H100 80GB HBM3")
    assert peaks.memory_bw_gbps == 3350.0
    assert peaks.bf16_tflops == peaks.fp16_tflops == 989.4


def test_h200_has_more_bandwidth_and_same_compute_as_h100():
    assert gpu_peaks("NVIDIA H200").memory_bw_gbps == 4800.0
    assert gpu_peaks("NVIDIA H200").bf16_tflops == gpu_peaks("NVIDIA H100 80GB HBM3").bf16_tflops


def test_names_match_exactly_not_by_prefix():
    assert gpu_peaks("NVIDIA A10").memory_bw_gbps == 600.0
    assert gpu_peaks("NVIDIA A100-SXM4-80GB").memory_bw_gbps == 2039.0


def test_surrounding_whitespace_is_ignored():
    assert gpu_peaks("  NVIDIA L4 \n") == gpu_peaks("NVIDIA L4")


@pytest.mark.parametrize("name", ["NVIDIA GeForce RTX 3090", "", "H100"])
def test_unknown_gpus_have_no_peaks(name):
    assert gpu_peaks(name) is None
