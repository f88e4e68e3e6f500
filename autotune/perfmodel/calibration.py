"""How far below its peaks a serving engine runs: the roofline's named corrections and their sources.

A roofline at datasheet peaks is a ceiling (DESIGN.md section 12). A plan's central values instead
take the shares of the peaks that kernels reach and a serving engine's per-step host overhead:

    memory time  = bytes / (peak bandwidth x BANDWIDTH_FRACTION)
    compute time = FLOPs / (peak FLOP/s at the dtype x GEMM_FRACTION)
    step         = max(memory, compute) + ENGINE_STEP_OVERHEAD_US[engine] + kernels x KERNEL_LATENCY_US
                   (+ tensor parallelism's all-reduces: :mod:`autotune.perfmodel.roofline`)

A stored probe of the same GPU model (``autotune probe`` on it) replaces the bandwidth fraction by
the measured one; a stored real-engine cost profile of the same GPU model and engine (a tune's
timing runs) replaces the engine's step overhead, and the bandwidth fraction where its points
identify it, by fitted ones (:mod:`autotune.perfmodel.step_fit`). :func:`calibrate` says which it
used in ``AcceleratorSpec.calibration`` (and the profile in ``calibrated_from``).

The real step can be slower than these central values for more reasons than faster (attention
kernels at short contexts, MoE load imbalance, a scheduler that does not overlap): the interval is
wider on the slow side (``SLOW_SPREAD`` against ``FAST_SPREAD``, one sigma, relative).
"""

from __future__ import annotations

from dataclasses import replace

from autotune.errors import ConfigurationError
from autotune.hardware.catalog import AcceleratorSpec
from autotune.perfmodel.step_fit import StepFit

# Decode reads every weight once per step: serving engines reach roughly 75-85 % of HBM bandwidth
# there (DESIGN.md section 12). Our own H200 probe's copy kernel reached 0.88 of the NVML peak
# (docs/benchmarks.md, 2026-12-04): a ceiling no GEMV beats. The midpoint of the serving range:
BANDWIDTH_FRACTION = 0.80
# Large bf16 GEMMs reached 0.81 of the datasheet peak on our H200 probe (docs/benchmarks.md); the
# GEMMs of a decode step are skinnier (rows = batch x tokens) and attention reaches less, so the
# compute roof is taken lower.
GEMM_FRACTION = 0.70
# Host work per engine step that the GPU waits for (scheduling, sampling, input preparation, the
# graph launch), in microseconds:
# - TensorRT-LLM: its overlap scheduler (on by default) runs step n's host work while the GPU runs
#   step n+1 (nvidia.github.io/TensorRT-LLM/features/overlap-scheduler.html): what is left is the
#   graph launch and sampling, ~0.1 ms.
# - SGLang: the zero-overhead batch scheduler overlaps the same way (lmsys.org/blog/2024-12-04-sglang-v0-4).
# - vLLM: async scheduling overlaps it too (vllm-project/vllm#19970, #23569); the design estimate of
#   the remaining gap between decode steps was 200-300 us (vllm-project/vllm#10634): 250 us.
# DESIGN.md section 12: a serving step's host overhead is ~0.2-1 ms unless CUDA graphs and overlap hide it.
ENGINE_STEP_OVERHEAD_US = {"trtllm": 100.0, "sglang": 100.0, "vllm": 250.0}
DEFAULT_ENGINE = "trtllm"
SLOW_SPREAD = 0.30
FAST_SPREAD = 0.12


def calibrate(spec: AcceleratorSpec, engine: str = DEFAULT_ENGINE, probe_bw_fraction: float | None = None,
              probe_label: str | None = None, fit: StepFit | None = None, no_fit: str | None = None) -> AcceleratorSpec:
    """``spec`` with the achieved fractions and ``engine``'s step overhead (module doc): a probe's
    measured bandwidth fraction (``probe_bw_fraction``, from ``probe_label``) replaces the default,
    a stored cost profile's ``fit`` replaces the overhead and, where it has one, the bandwidth;
    ``no_fit`` says why no fit was used (printed with the assumed overhead)."""
    if engine not in ENGINE_STEP_OVERHEAD_US:
        raise ConfigurationError(f"unknown engine {engine!r}: use one of {', '.join(ENGINE_STEP_OVERHEAD_US)}")
    if fit is not None and fit.bandwidth_fraction is not None:
        bandwidth = min(fit.bandwidth_fraction, 1.0)
        origin = f"bandwidth {bandwidth:.2f} of peak fitted to {fit.label}"
    elif probe_bw_fraction is not None:
        bandwidth = min(probe_bw_fraction, 1.0)
        origin = f"bandwidth {bandwidth:.2f} of peak measured by {probe_label}"
    else:
        bandwidth = BANDWIDTH_FRACTION
        origin = f"bandwidth {bandwidth:.2f} of peak (serving engines' typical share, assumed)"
    if fit is not None:
        overhead = fit.pass_overhead_us
        step = f"{engine} step overhead {overhead:.0f} us fitted to {fit.label} ({fit.concurrencies} concurrency levels)"
    else:
        overhead = ENGINE_STEP_OVERHEAD_US[engine]
        step = f"{engine} step overhead {overhead:.0f} us (assumed{'; ' + no_fit if no_fit else ''})"
    text = (f"{origin}; GEMM {GEMM_FRACTION:.2f} of peak (assumed); {step}; "
            f"+ {spec.kernel_latency_us:g} us per kernel (assumed)")
    return replace(spec, bandwidth_fraction=bandwidth, gemm_fraction=GEMM_FRACTION, pass_overhead_us=overhead,
                   calibration=text, calibrated_from=fit.label if fit is not None else None, overhead_origin=step)
