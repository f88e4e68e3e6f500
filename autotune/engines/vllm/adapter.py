"""The vLLM engine's adapter: Hugging Face folders on a GPU or CPU, in worker processes."""

from __future__ import annotations

from typing import Any

from autotune.engines.adapter import EngineAdapter
from autotune.engines.base import Engine
from autotune.engines.vllm.checks import VLLM_SUPPORT
from autotune.engines.vllm import require_vllm
from autotune.engines.worker import EngineSpec
from autotune.models.folder import HfModel
from autotune.models.support import FolderSupport


class VllmAdapter(EngineAdapter):
    """:class:`~autotune.engines.vllm.engine.VllmEngine` (target, max_batch_size, max_ngram,
    enforce_eager, timeout_s)."""

    name = "vllm"
    runs_model_folders = True
    times_steps = False  # vLLM exposes no forcing switch we could drive
    default_sampler = "tpe"

    def require_installed(self) -> None:
        require_vllm()

    def create(self, **kwargs: Any) -> Engine:
        from autotune.engines.vllm.engine import VllmEngine

        return VllmEngine(**kwargs)

    def spec(self, **kwargs: Any) -> EngineSpec:
        from autotune.engines.vllm.engine import runner_spec

        return runner_spec(**kwargs)

    def folder_support(self) -> FolderSupport:
        return VLLM_SUPPORT

    def study_spec(self, target: str, *, max_batch_size: int, device: str,
                   models: tuple[HfModel, ...] = ()) -> EngineSpec:
        # vLLM's engine is built once for the study's largest batch size, so every batch size reuses it.
        return self.spec(target=target, max_batch_size=max_batch_size, models=models)
