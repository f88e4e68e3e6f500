"""The embedded engine's adapter: our PyTorch engine on model files, in the caller's process."""

from __future__ import annotations

from typing import Any

from autotune.engines.adapter import EngineAdapter
from autotune.engines.base import Engine
from autotune.engines.worker import EngineSpec
from autotune.models.folder import HfModel

FACTORY = "autotune.engines.embedded.engine:EmbeddedEngine"


class EmbeddedAdapter(EngineAdapter):
    """:class:`~autotune.engines.embedded.engine.EmbeddedEngine` (target, device, dtype, max_ngram)."""

    name = "embedded"
    display_name = "embedded"
    runs_model_folders = False
    limits_threads = True
    times_steps = True
    default_sampler = "model"

    def create(self, **kwargs: Any) -> Engine:
        from autotune.engines.embedded.engine import EmbeddedEngine  # torch only when measuring

        return EmbeddedEngine(**kwargs)

    def spec(self, **kwargs: Any) -> EngineSpec:
        return EngineSpec(FACTORY, kwargs)

    def study_spec(self, target: str, *, max_batch_size: int, device: str,
                   models: tuple[HfModel, ...] = ()) -> EngineSpec:
        # The embedded engine sizes itself per batch and runs its own model files: only the device matters.
        return self.spec(target=target, device=device)
