"""vLLM step-cost timing without vLLM: what a timing build is given (synthetic acceptance of every
draft, our CPU worker where vLLM's CPU kernel lacks it), that our CPU kernel keeps vLLM's synthetic
rule, and how a timing run's counters are judged."""

from __future__ import annotations

import pytest
import torch

from autotune.engines.base import EngineConfig
from autotune.engines.vllm.mapping import engine_arguments
from autotune.engines.vllm.timing import (
    CPU_SYNTHETIC_WORKER,
    TimedStep,
    require_synthetic,
    timing_arguments,
    timing_point,
)
from autotune.errors import EngineError
from autotune.engines.vllm.synthetic_kernel import DraftBatch, synthetic_greedy_sample
from autotune.models.kind import DRAFT_TARGET

DRAFT = EngineConfig("draft", 2, "/models/draft")


def test_a_timing_build_accepts_every_draft_and_gets_our_kernel_only_on_a_cpu_without_it() -> None:
    arguments = engine_arguments(DRAFT, "/models/target", 4, DRAFT_TARGET)
    timing = timing_arguments(arguments, DRAFT.depth, cpu_kernel=True)
    assert timing["speculative_config"] == {
        "method": "draft_model", "num_speculative_tokens": 2, "model": "/models/draft",
        "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [1.0, 1.0],
    }
    assert timing["worker_cls"] == CPU_SYNTHETIC_WORKER == "autotune.engines.vllm.synthetic_cpu.SyntheticAcceptanceCPUWorker"
    assert {k: v for k, v in timing.items() if k not in ("speculative_config", "worker_cls")} == {
        k: v for k, v in arguments.items() if k != "speculative_config"}  # built as measured otherwise
    assert "rejection_sample_method" not in arguments["speculative_config"]  # the measurement's arguments untouched
    assert "worker_cls" not in timing_arguments(arguments, DRAFT.depth, cpu_kernel=False)
    ngram = timing_arguments(engine_arguments(EngineConfig("ngram", 3), "/t", 2, None), 3, cpu_kernel=False)
    assert ngram["speculative_config"]["synthetic_acceptance_rates"] == [1.0] * 3
    baseline = engine_arguments(EngineConfig("none"), "/models/target", 4, None)
    assert timing_arguments(baseline, 0, cpu_kernel=True) == baseline  # no speculation: nothing to force


def steps(accepted_last: int = 4) -> list[TimedStep]:
    """A timing run at batch 2, depth 2: one prefill step, three full steps, one step with one row left."""
    return [TimedStep(0.030, 0), TimedStep(0.010, 2, 4, 4), TimedStep(0.012, 2, 4, 4), TimedStep(0.011, 2, 4, accepted_last),
            TimedStep(0.005, 1, 2, 2)]


def test_the_point_times_the_steps_that_ran_every_row() -> None:
    point = timing_point(steps(), DRAFT, 2, 1, 40, "0.32.0")
    assert point["steps"] == 3 and point["propose_s"] == 0.0  # vLLM does not time drafting apart
    assert point["verify_s"] == pytest.approx(0.011) and point["prefill_s"] == pytest.approx(0.030)
    assert point["drafted_per_step"] == 2.0 and point["round"] == 1 and point["prefill_tokens"] == 40
    assert (point["method"], point["draft"], point["depth"], point["concurrency"]) == ("draft", "/models/draft", 2, 2)


def test_a_rejected_draft_refuses_the_timing_naming_the_version() -> None:
    with pytest.raises(EngineError, match=r"^vLLM 0\.32\.0 accepted 13 of 14 draft tokens with rejection_sample_method="
                                          r"'synthetic', synthetic_acceptance_rates=\[1\.0, 1\.0\]: this version does not "
                                          "force acceptance"):
        timing_point(steps(accepted_last=3), DRAFT, 2, 0, 40, "0.32.0")
    with pytest.raises(EngineError, match="no vLLM step decoded all 3 sequences"):
        timing_point(steps(), DRAFT, 3, 0, 40, "0.32.0")


def test_a_vllm_without_synthetic_acceptance_is_refused_before_any_build() -> None:
    require_synthetic(["method", "rejection_sample_method", "synthetic_acceptance_rates"], "0.32.0")
    with pytest.raises(EngineError, match=r"^vLLM 0\.10\.1 has no synthetic acceptance \(SpeculativeConfig lacks "
                                          "rejection_sample_method, synthetic_acceptance_rates; vLLM 0.32 has it\\)"):
        require_synthetic(["method", "num_speculative_tokens"], "0.10.1")



def test_the_cpu_kernel_follows_vllms_synthetic_rule() -> None:
    """Four greedy requests at depth 2 and one sampled, against the rule of vLLM 0.32.0's Triton
    kernel (rejection_sampler.py l. 726-780)."""
    out = torch.full((4, 3), -1, dtype=torch.int32)
    batch = DraftBatch(out, torch.tensor([2, 4, 6, 8]), torch.tensor([10, 11, 20, -1, 30, 31, 40, 41]),
                       torch.tensor([[12], [22], [32], [42]]), torch.tensor([0.99, 0.4, 0.2, 0.2, 0.3, 0.9, 0.0, 0.0]),
                       torch.tensor([1.0, 0.5]))
    synthetic_greedy_sample(batch, torch.tensor([50, 51, 60, 61, 70, 71, 80, 81]), torch.tensor([True, True, True, False]))
    assert out.tolist() == [
        [10, 11, 12],  # both draws below their rates (1.0, then 0.5): both drafts, then the bonus token
        [20, 61, -1],  # a padded draft (-1) is rejected whatever the draw: the target's argmax, no bonus
        [30, 71, -1],  # 0.9 is not below 0.5: rejected at position 1
        [-1, -1, -1],  # a sampled row is the random kernel's
    ]
    every = torch.full((1, 3), -1, dtype=torch.int32)  # what timing asks for: rates of 1.0 accept every draw
    batch = DraftBatch(every, torch.tensor([2]), torch.tensor([7, 8]), torch.tensor([[9]]), torch.tensor([0.999, 0.999]),
                       torch.tensor([1.0, 1.0]))
    synthetic_greedy_sample(batch, torch.tensor([0, 0]), None)
    assert every.tolist() == [[7, 8, 9]]
