"""vLLM's synthetic acceptance on its CPU backend, for step-cost timing builds only.

vLLM 0.32.0's CPU backend without Triton replaces the rejection sampler's Triton kernels by C++ ones
(``CpuPlatform.register_triton_kernel_overrides``, ``vllm/platforms/cpu.py`` l. 670-720) whose
greedy kernel asserts ``not SYNTHETIC_MODE`` (``vllm/utils/cpu_triton_utils.py`` l. 330): the
synthetic acceptance the timing runs force (:mod:`autotune.engines.vllm.timing`) kills the engine
core there. A timing build on such a CPU therefore names :class:`SyntheticAcceptanceCPUWorker` as
vLLM's ``worker_cls``: vLLM's own CPU worker that, once the platform has registered its kernels
(``WorkerWrapperBase.init_worker``, ``vllm/v1/worker/worker_base.py`` l. 282, before the worker class
is resolved), registers :func:`greedy_kernel` and :func:`random_kernel` for the two rejection
kernels through vLLM's override registry (``vllm/triton_utils/dispatcher.py`` ``register_kernels``,
the mechanism the platform uses). Timing runs are greedy; the random kernel runs in synthetic mode
when a compiled engine warms up (``CPUModelRunner.warming_up_model`` samples dummy requests), which
vLLM's C++ kernel refuses too.

This module imports vllm and is imported only by vLLM's worker process.
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.triton_utils.dispatcher import register_kernels
from vllm.utils import cpu_triton_utils
from vllm.v1.worker.cpu_worker import CPUWorker

from autotune.engines.vllm.synthetic_kernel import DraftBatch, synthetic_greedy_sample, synthetic_random_sample

GREEDY_KERNEL = "vllm.v1.sample.rejection_sampler.rejection_greedy_sample_kernel"
RANDOM_KERNEL = "vllm.v1.sample.rejection_sampler.rejection_random_sample_kernel"

# greedy_kernel and random_kernel take more than 7 parameters on purpose: vLLM's dispatcher calls them
# in place of rejection_greedy_sample_kernel and rejection_random_sample_kernel
# (vllm/v1/sample/rejection_sampler.py, vLLM 0.32.0) with those kernels' launch arguments, by name.


def greedy_kernel(
    output_token_ids: torch.Tensor,
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    target_argmax: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    is_greedy: torch.Tensor | None,
    max_spec_len: int,
    uniform_probs: torch.Tensor | None = None,
    synthetic_conditional_rates: torch.Tensor | None = None,
    SYNTHETIC_MODE: bool = False,  # noqa: N803 - the kernel's own argument name
) -> None:
    """``rejection_greedy_sample_kernel``'s launch arguments, as vLLM's dispatcher passes them: the
    synthetic rule (:func:`~autotune.engines.vllm.synthetic_kernel.synthetic_greedy_sample`) in
    synthetic mode, vLLM's own C++ kernel otherwise."""
    if not SYNTHETIC_MODE:
        cpu_triton_utils._rejection_greedy_sample_kernel_impl(  # noqa: SLF001 - the platform's own kernel
            output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax, bonus_token_ids, is_greedy,
            max_spec_len)
        return
    batch = DraftBatch(output_token_ids, cu_num_draft_tokens, draft_token_ids, bonus_token_ids, uniform_probs,
                       synthetic_conditional_rates)
    synthetic_greedy_sample(batch, target_argmax, is_greedy)


def random_kernel(
    output_token_ids: torch.Tensor,
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    recovered_token_ids: torch.Tensor,
    uniform_probs: torch.Tensor,
    is_greedy: torch.Tensor,
    max_spec_len: int,
    vocab_size: int,
    synthetic_conditional_rates: torch.Tensor | None = None,
    NO_DRAFT_PROBS: bool = False,  # noqa: N803 - the kernel's own argument names
    SYNTHETIC_MODE: bool = False,  # noqa: N803
) -> None:
    """``rejection_random_sample_kernel``'s launch arguments: the synthetic rule
    (:func:`~autotune.engines.vllm.synthetic_kernel.synthetic_random_sample`) in synthetic mode,
    vLLM's own C++ kernel otherwise."""
    if not SYNTHETIC_MODE:
        cpu_triton_utils._rejection_random_sample_kernel_impl(  # noqa: SLF001 - the platform's own kernel
            output_token_ids, cu_num_draft_tokens, draft_token_ids, draft_probs, target_probs, bonus_token_ids,
            recovered_token_ids, uniform_probs, is_greedy, max_spec_len, vocab_size,
            NO_DRAFT_PROBS=NO_DRAFT_PROBS)
        return
    batch = DraftBatch(output_token_ids, cu_num_draft_tokens, draft_token_ids, bonus_token_ids, uniform_probs,
                       synthetic_conditional_rates)
    synthetic_random_sample(batch, recovered_token_ids, is_greedy)


class SyntheticAcceptanceCPUWorker(CPUWorker):
    """vLLM's CPU worker with :func:`greedy_kernel` and :func:`random_kernel` as its rejection kernels."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        register_kernels({GREEDY_KERNEL: greedy_kernel, RANDOM_KERNEL: random_kernel})
        super().__init__(*args, **kwargs)
