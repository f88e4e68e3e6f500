"""Engines by name: one :class:`~autotune.engines.adapter.EngineAdapter` each, holding what the
engine can do; ``create_engine("embedded" | "trtllm" | "vllm", ...)`` for measuring in this process's
caller, ``engine_spec(...)`` for an :class:`~autotune.engines.worker.EngineWorker` (the tuner).

Importing this module loads neither torch nor tensorrt_llm nor vllm: each engine is imported when created.
"""

from __future__ import annotations

from typing import Any

from autotune.engines.adapter import EngineAdapter
from autotune.engines.base import Engine
from autotune.engines.embedded.adapter import EmbeddedAdapter
from autotune.engines.trtllm.adapter import TrtLlmAdapter
from autotune.engines.vllm.adapter import VllmAdapter
from autotune.engines.worker import EngineSpec
from autotune.errors import ConfigurationError
from autotune.models.support import FolderSupport

ADAPTERS: dict[str, EngineAdapter] = {
    adapter.name: adapter for adapter in (EmbeddedAdapter(), TrtLlmAdapter(), VllmAdapter())
}
ENGINES = tuple(ADAPTERS)
# The engines that run Hugging Face model folders (the preflight's engines).
FOLDER_ENGINES = tuple(name for name, adapter in ADAPTERS.items() if adapter.runs_model_folders)


def engine_adapter(name: str) -> EngineAdapter:
    """The adapter of engine ``name``; ConfigurationError for an unknown engine."""
    if name not in ADAPTERS:
        raise ConfigurationError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    return ADAPTERS[name]


def check_engine(name: str) -> None:
    """ConfigurationError for an unknown engine; for ``trtllm`` without TensorRT-LLM installed,
    :class:`~autotune.engines.trtllm.TensorRtLlmNotInstalledError`, for ``vllm`` without vLLM,
    :class:`~autotune.engines.vllm.VllmNotInstalledError` (nothing is started)."""
    engine_adapter(name).require_installed()


def folder_support(name: str) -> FolderSupport:
    """Which Hugging Face model folders engine ``name`` runs, for the preflight; ConfigurationError
    for an engine that does not run such folders (the embedded one runs its own model files).
    Imports neither tensorrt_llm nor vllm: the rules are tables and config.json look-ups."""
    support = engine_adapter(name).folder_support()
    if support is None:
        raise ConfigurationError(f"engine {name!r} does not run Hugging Face model folders; "
                                 f"use --engine {' or '.join(FOLDER_ENGINES)}")
    return support


def create_engine(name: str, **kwargs: Any) -> Engine:
    """The engine called ``name``, built with ``kwargs``.

    ``embedded``: :class:`~autotune.engines.embedded.engine.EmbeddedEngine` (target, device, dtype,
    max_ngram), in this process. ``trtllm``: :class:`~autotune.engines.trtllm.engine.TrtLlmEngine`
    (target, max_batch_size, tensor_parallel_size, max_ngram, timeout_s, stats_timeout_s), measuring in worker
    processes; fails at once when TensorRT-LLM is not installed. ``vllm``:
    :class:`~autotune.engines.vllm.engine.VllmEngine` (target, max_batch_size, max_ngram, enforce_eager,
    timeout_s), likewise.
    """
    check_engine(name)
    return ADAPTERS[name].create(**kwargs)


def engine_spec(name: str, **kwargs: Any) -> EngineSpec:
    """How an EngineWorker's child builds engine ``name`` (checked as :func:`check_engine` does).
    ``trtllm`` kwargs: target, max_batch_size (pass the largest concurrency of the study, so one LLM
    serves every concurrency), tensor_parallel_size, max_ngram, stats_timeout_s, models (the model
    folders already read, so that the worker reads none again); ``vllm`` kwargs: target,
    max_batch_size (likewise), max_ngram, enforce_eager, models."""
    check_engine(name)
    return ADAPTERS[name].spec(**kwargs)
