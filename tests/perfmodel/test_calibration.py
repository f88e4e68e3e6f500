"""The roofline's calibration: named fractions of the peaks and an engine's step overhead, a probe's
measured bandwidth in place of the assumed one, and every choice said in words."""

from __future__ import annotations

import pytest

from autotune.errors import ConfigurationError
from autotune.hardware.catalog import accelerator
from autotune.perfmodel.calibration import (
    BANDWIDTH_FRACTION,
    ENGINE_STEP_OVERHEAD_US,
    GEMM_FRACTION,
    SLOW_SPREAD,
    FAST_SPREAD,
    calibrate,
)
from autotune.perfmodel.roofline import ModelShape, forward_pass

LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}


def test_calibrated_step_is_slower_than_the_peaks_and_says_why() -> None:
    peak = accelerator("h200")
    spec = calibrate(peak, "vllm")
    assert (spec.bandwidth_fraction, spec.gemm_fraction) == (BANDWIDTH_FRACTION, GEMM_FRACTION)
    assert spec.pass_overhead_us == ENGINE_STEP_OVERHEAD_US["vllm"] and "vllm" in spec.calibration
    shape = ModelShape.from_config(LLAMA_8B)
    ideal, real = forward_pass(peak, shape, 1, 1, 1024), forward_pass(spec, shape, 1, 1, 1024)
    assert real.memory_s == pytest.approx(ideal.memory_s / BANDWIDTH_FRACTION)
    assert real.seconds > ideal.seconds
    assert SLOW_SPREAD > FAST_SPREAD  # the interval is wider on the slow side


def test_a_probe_replaces_the_assumed_bandwidth() -> None:
    spec = calibrate(accelerator("h200"), probe_bw_fraction=0.88, probe_label="probe 3 of my-h200")
    assert spec.bandwidth_fraction == 0.88 and "measured by probe 3 of my-h200" in spec.calibration


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="unknown engine"):
        calibrate(accelerator("h200"), "tgi")
