"""The vLLM engine's adapter: Hugging Face folders on a GPU or CPU, in worker processes."""

from __future__ import annotations

from typing import Any

from autotune.engines.adapter import FolderEngineAdapter
from autotune.engines.base import Engine
from autotune.engines.vllm.checks import VLLM_SUPPORT
from autotune.engines.vllm import require_vllm
from autotune.engines.vllm.mapping import VLLM_OFF_RULE, mtp_depth_refusal
from autotune.engines.worker import EngineSpec
from autotune.models.folder import HfModel
from autotune.models.kind import mtp_layers


class VllmAdapter(FolderEngineAdapter):
    """:class:`~autotune.engines.vllm.engine.VllmEngine` (target, max_batch_size, max_ngram,
    enforce_eager, timeout_s)."""

    name = "vllm"
    display_name = "vLLM"
    support = VLLM_SUPPORT
    times_steps = True  # synthetic acceptance (autotune.engines.vllm.timing)
    default_sampler = "model"
    off_rule = VLLM_OFF_RULE

    def require_installed(self) -> None:
        require_vllm()

    def create(self, **kwargs: Any) -> Engine:
        from autotune.engines.vllm.engine import VllmEngine

        return VllmEngine(**kwargs)

    def spec(self, **kwargs: Any) -> EngineSpec:
        from autotune.engines.vllm.engine import runner_spec

        return runner_spec(**kwargs)

    def depth_refusal(self, method: str, depth: int, target: HfModel | None) -> str | None:
        if method != "mtp" or target is None:
            return None
        return mtp_depth_refusal(depth, mtp_layers(target.config))
