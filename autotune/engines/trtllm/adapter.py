"""The TensorRT-LLM engine's adapter: Hugging Face folders on an NVIDIA GPU, in worker processes."""

from __future__ import annotations

from typing import Any

from autotune.engines.adapter import FolderEngineAdapter
from autotune.engines.base import Engine
from autotune.engines.trtllm.checks import TRTLLM_SUPPORT
from autotune.engines.trtllm import require_tensorrt_llm
from autotune.engines.trtllm.mapping import TRTLLM_OFF_RULE
from autotune.engines.worker import EngineSpec


class TrtLlmAdapter(FolderEngineAdapter):
    """:class:`~autotune.engines.trtllm.engine.TrtLlmEngine` (target, max_batch_size,
    tensor_parallel_size, max_ngram, timeout_s, stats_timeout_s)."""

    name = "trtllm"
    display_name = "TensorRT-LLM"
    support = TRTLLM_SUPPORT
    times_steps = True
    # Its forced-acceptance timings have run against the stand-in only, never on a GPU (docs/trtllm.md);
    # a release that does not force acceptance fails the timing with one line, never silently.
    default_sampler = "model"
    off_rule = TRTLLM_OFF_RULE
    needs_cuda = True

    def require_installed(self) -> None:
        require_tensorrt_llm()

    def create(self, **kwargs: Any) -> Engine:
        from autotune.engines.trtllm.engine import TrtLlmEngine

        return TrtLlmEngine(**kwargs)

    def spec(self, **kwargs: Any) -> EngineSpec:
        from autotune.engines.trtllm.engine import runner_spec

        return runner_spec(**kwargs)
