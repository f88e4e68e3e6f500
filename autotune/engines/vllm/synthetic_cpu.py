"""vLLM's synthetic acceptance on its CPU backend, for step-cost timing builds only.

vLLM 0.32.0's CPU backend without Triton replaces the rejection sampler's Triton kernels by C++ ones
(``CpuPlatform.register_triton_kernel_overrides``, ``vllm/platforms/cpu.py`` l. 670-720) whose
greedy kernel asserts ``not SYNTHETIC_MODE`` (``vllm/utils/cpu_triton_utils.py`` l. 330): the
synthetic acceptance the timing runs force (:mod:`autotune.engines.vllm.timing`) kills the engine
core there. A timing build on such a CPU therefore names :class:`SyntheticAcceptanceCPUWorker` as
vLLM's ``worker_cls``: vLLM's own CPU worker that, once the platform has registered its kernels
(``WorkerWrapperBase.init_worker``, ``vllm/v1/worker/worker_base.py`` l. 282, before the worker class
is resolved), registers :func:`synthetic_greedy_sample` for the greedy kernel through vLLM's override
registry (``vllm/triton_utils/dispatcher.py`` ``register_kernels``, the mechanism the platform uses).

This module imports vllm and is imported only by vLLM's worker process. Timing runs are greedy, so
the random kernel (sampled requests) keeps vLLM's implementation.
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.triton_utils.dispatcher import register_kernels
from vllm.utils import cpu_triton_utils
from vllm.v1.worker.cpu_worker import CPUWorker

GREEDY_KERNEL = "vllm.v1.sample.rejection_sampler.rejection_greedy_sample_kernel"


def synthetic_greedy_sample(
    output_token_ids: torch.Tensor,  # [batch, max_spec_len + 1], filled with the placeholder id
    cu_num_draft_tokens: torch.Tensor,  # [batch]: cumulative draft tokens per request
    draft_token_ids: torch.Tensor,  # [num_tokens]
    target_argmax: torch.Tensor,  # [num_tokens]
    bonus_token_ids: torch.Tensor,  # [batch, 1]
    is_greedy: torch.Tensor | None,  # [batch], None when every request is greedy
    max_spec_len: int,
    uniform_probs: torch.Tensor | None = None,  # [num_tokens] in [0, 1): synthetic mode only
    synthetic_conditional_rates: torch.Tensor | None = None,  # [num_speculative_tokens]
    SYNTHETIC_MODE: bool = False,  # noqa: N803 - the kernel's own argument name
) -> Any:
    """``rejection_greedy_sample_kernel`` (``vllm/v1/sample/rejection_sampler.py`` l. 726-780, vLLM
    0.32.0) in plain torch: per greedy request, draft position i is accepted when its uniform draw
    is below conditional rate i and the draft token is real (>= 0); the first rejection emits the
    target's argmax and stops; with none, the bonus token follows. Without synthetic mode, vLLM's
    own C++ kernel runs."""
    if not SYNTHETIC_MODE:
        return cpu_triton_utils._rejection_greedy_sample_kernel_impl(  # noqa: SLF001 - the platform's own kernel
            output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax, bonus_token_ids, is_greedy,
            max_spec_len)
    drafts, argmax, draws = draft_token_ids.tolist(), target_argmax.tolist(), uniform_probs.tolist()
    rates, bonus = synthetic_conditional_rates.tolist(), bonus_token_ids.view(-1).tolist()
    greedy = None if is_greedy is None else is_greedy.tolist()
    start = 0
    for row, end in enumerate(cu_num_draft_tokens.tolist()):
        if greedy is None or greedy[row]:
            tokens = []
            for i in range(start, end):
                accepted = draws[i] < rates[i - start] and drafts[i] >= 0
                tokens.append(drafts[i] if accepted else argmax[i])
                if not accepted:
                    break
            else:
                tokens.append(bonus[row])
            output_token_ids[row, :len(tokens)] = torch.tensor(tokens, dtype=output_token_ids.dtype)
        start = end
    return None


class SyntheticAcceptanceCPUWorker(CPUWorker):
    """vLLM's CPU worker with :func:`synthetic_greedy_sample` as its greedy rejection kernel."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        register_kernels({GREEDY_KERNEL: synthetic_greedy_sample})
        super().__init__(*args, **kwargs)
