import types

import pytest
import torch

from autotune.hardware.microbench import (
    MAX_ITERATIONS,
    MIN_TIMING_S,
    BenchTarget,
    best_seconds,
    copy_bandwidth_gbps,
    cuda_event_timer,
    launch_overhead_us,
    matmul_flops_per_s,
    wall_timer,
)


def scripted_timer(seconds: list[float]):
    """A timer that returns the given timings in turn and counts the calls it made."""
    remaining = iter(seconds)
    calls = []

    def timer(run, iterations):
        for _ in range(iterations):
            run()
            calls.append(1)
        return next(remaining)

    timer.calls = calls
    return timer


class FakeEvent:
    """A CUDA event whose clock is the number of kernels the fake stream has run, 0.5 ms each."""

    def __init__(self, stream, enable_timing):
        assert enable_timing, "timing events must be created with enable_timing=True"
        self.stream = stream
        self.at_kernel = None
        self.synchronized = False

    def record(self):
        self.at_kernel = self.stream.kernels

    def synchronize(self):
        self.synchronized = True

    def elapsed_time(self, end):
        assert end.synchronized, "must synchronise on the end event before reading the time"
        return (end.at_kernel - self.at_kernel) * 0.5  # ms


def fake_cuda_torch():
    stream = types.SimpleNamespace(kernels=0)
    cuda = types.SimpleNamespace(Event=lambda enable_timing=False: FakeEvent(stream, enable_timing))
    return types.SimpleNamespace(cuda=cuda), stream


def test_cuda_event_timer_reports_gpu_seconds_per_call():
    fake_torch, stream = fake_cuda_torch()

    def launch():
        stream.kernels += 1

    seconds = cuda_event_timer(fake_torch)(launch, 10)
    assert stream.kernels == 10
    assert seconds == pytest.approx(0.5e-3)


def test_wall_timer_runs_the_work_each_iteration():
    calls = []
    seconds = wall_timer(lambda: calls.append(1), 7)
    assert len(calls) == 7
    assert seconds >= 0


def test_best_seconds_warms_up_then_keeps_the_fastest_timing():
    timer = scripted_timer([3.0, 1.0, 2.0])
    target = BenchTarget(torch=torch, device="cpu", timer=timer, repeats=3)
    runs = []
    assert best_seconds(target, lambda: runs.append(1), iterations=2, warmup=1) == 1.0
    assert len(runs) == 1 + 3 * 2  # one warm-up, then three timings of two iterations
    assert len(timer.calls) == 6


def test_best_seconds_repeats_short_work_until_a_timing_is_long_enough():
    timer = scripted_timer([MIN_TIMING_S / 4, 0.5, 0.4])  # calibration timing, then two repeats
    target = BenchTarget(torch=torch, device="cpu", timer=timer, repeats=2)
    assert best_seconds(target, lambda: None) == 0.4
    assert len(timer.calls) == 1 + 2 * 4


@pytest.mark.parametrize("once, iterations", [(10 * MIN_TIMING_S, 1), (0.0, MAX_ITERATIONS), (1e-9, MAX_ITERATIONS)])
def test_calibrated_iterations_stay_within_bounds(once, iterations):
    timer = scripted_timer([once, 1.0])
    best_seconds(BenchTarget(torch=torch, device="cpu", timer=timer, repeats=1), lambda: None, warmup=0)
    assert len(timer.calls) == 1 + iterations


def test_target_needs_at_least_one_repeat():
    with pytest.raises(ValueError, match="repeats"):
        BenchTarget(torch=torch, device="cpu", timer=wall_timer, repeats=0)


def test_copy_bandwidth_counts_bytes_read_and_written(fixed_target, fixed_seconds):
    assert copy_bandwidth_gbps(fixed_target, 4096) == pytest.approx(2 * 4096 / fixed_seconds / 1e9)


def test_copy_bandwidth_counts_whole_float32_elements_only(fixed_target, fixed_seconds):
    assert copy_bandwidth_gbps(fixed_target, 4099) == pytest.approx(2 * 4096 / fixed_seconds / 1e9)


def test_matmul_throughput_is_two_n_cubed_per_second(fixed_target, fixed_seconds):
    assert matmul_flops_per_s(fixed_target, torch.float32, 16) == pytest.approx(2 * 16**3 / fixed_seconds)
    assert matmul_flops_per_s(fixed_target, torch.bfloat16, 8) == pytest.approx(2 * 8**3 / fixed_seconds)


def test_launch_overhead_is_microseconds_per_op(fixed_target, fixed_seconds):
    assert launch_overhead_us(fixed_target, 5) == pytest.approx(fixed_seconds * 1e6)


def test_benchmarks_run_for_real_on_the_cpu():
    target = BenchTarget(torch=torch, device="cpu", timer=wall_timer, repeats=1)
    assert copy_bandwidth_gbps(target, 1 << 20) > 0
    assert matmul_flops_per_s(target, torch.float32, 64) > 0
    assert launch_overhead_us(target, 10) > 0


@pytest.mark.parametrize("benchmark, size", [(copy_bandwidth_gbps, 3), (launch_overhead_us, 0)])
def test_rejects_sizes_too_small_to_measure(fixed_target, benchmark, size):
    with pytest.raises(ValueError):
        benchmark(fixed_target, size)


def test_matmul_rejects_empty_size(fixed_target):
    with pytest.raises(ValueError, match="matmul size"):
        matmul_flops_per_s(fixed_target, torch.float32, 0)
