"""What autotune needs to know about an engine, kept on the engine's adapter rather than in
checks of its name: how to build it (here or in a worker), what it runs on and what it can measure.

Each engine package defines its adapter (``embedded/adapter.py``, ``trtllm/adapter.py``,
``vllm/adapter.py``); :mod:`autotune.engines.registry` holds one instance of each by name.
Importing an adapter loads neither torch nor tensorrt_llm nor vllm.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from autotune.analysis.offstate import OffRule
from autotune.engines.base import Engine
from autotune.engines.worker import EngineSpec
from autotune.models.folder import HfModel
from autotune.models.support import FolderSupport


class EngineAdapter(ABC):
    """One engine's capabilities and constructors (subclasses set the class attributes)."""

    name: ClassVar[str]
    display_name: ClassVar[str]  # as its makers write it, for messages
    # Runs Hugging Face model folders (the target is required) in worker processes of its own,
    # rather than our model files in this process.
    runs_model_folders: ClassVar[bool]
    # Times step costs at forced acceptance (``EngineWorker.time_steps``): the performance model
    # and the model-guided sampler need them.
    times_steps: ClassVar[bool]
    # The ``--sampler`` a study gets when none is given (see autotune.search.samplers).
    default_sampler: ClassVar[str]
    # Runs on NVIDIA GPUs only: a machine without one cannot tune with it.
    needs_cuda: ClassVar[bool] = False
    # What "speculation off at a concurrency" means in the engine's speculative server
    # (autotune.analysis.offstate); None for an engine that serves nothing (the embedded one).
    off_rule: ClassVar[OffRule | None] = None
    # Computes on the thread count it is given (``set_threads``; EngineWorker.limit_threads): a
    # study under a load that persists measures it on the cores the load leaves.
    limits_threads: ClassVar[bool] = False

    def require_installed(self) -> None:
        """Raise an EngineError at once when the engine's package is missing (nothing is started)."""

    @abstractmethod
    def create(self, **kwargs: Any) -> Engine:
        """The engine, built with ``kwargs`` (see :func:`autotune.engines.registry.create_engine`)."""

    @abstractmethod
    def spec(self, **kwargs: Any) -> EngineSpec:
        """How an EngineWorker's child builds the engine (see :func:`autotune.engines.registry.engine_spec`)."""

    def depth_refusal(self, method: str, depth: int, target: HfModel | None) -> str | None:
        """Why the engine refuses ``method`` at ``depth`` for ``target`` (its folder; None for the
        built-in models) before anything is built, or None (the default: nothing known)."""
        return None

    def folder_support(self) -> FolderSupport | None:
        """Which Hugging Face model folders the engine runs (the preflight's rules for it); None for
        an engine that runs no such folders."""
        return None

    @abstractmethod
    def study_spec(self, target: str, *, max_batch_size: int, device: str,
                   models: tuple[HfModel, ...] = ()) -> EngineSpec:
        """The worker spec a tuning study runs: ``target`` on ``device`` (cpu or cuda), serving every
        concurrency up to ``max_batch_size``; ``models``: the folders the preflight already read, so
        that the worker reads none again."""


class FolderEngineAdapter(EngineAdapter):
    """An engine that runs Hugging Face model folders in worker processes of its own (TensorRT-LLM,
    vLLM): ``support`` holds its architecture rules for the preflight."""

    runs_model_folders = True
    support: ClassVar[FolderSupport]

    def folder_support(self) -> FolderSupport:
        return self.support

    def study_spec(self, target: str, *, max_batch_size: int, device: str,
                   models: tuple[HfModel, ...] = ()) -> EngineSpec:
        # The engine is built once for the study's largest concurrency, so every concurrency reuses it;
        # it runs on the device it finds.
        return self.spec(target=target, max_batch_size=max_batch_size, models=models)
