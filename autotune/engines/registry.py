"""Engines by name: ``create_engine("embedded" | "trtllm" | "vllm", ...)`` for measuring in this process's
caller, ``engine_spec(...)`` for an :class:`~autotune.engines.worker.EngineWorker` (the tuner).

Importing this module loads neither torch nor tensorrt_llm nor vllm: each engine is imported when created.
"""

from __future__ import annotations

from typing import Any

from autotune.engines.base import Engine
from autotune.engines.worker import EngineSpec
from autotune.errors import ConfigurationError
from autotune.models.support import FolderSupport

ENGINES = ("embedded", "trtllm", "vllm")
# Engines that run Hugging Face model folders (the target is required) in worker processes of their own.
FOLDER_ENGINES = ("trtllm", "vllm")
# Engines whose adapters time step costs at forced acceptance (``time_steps``): the performance model
# and the model-guided sampler need them. vLLM exposes no forcing switch we could drive.
TIMED_ENGINES = ("embedded", "trtllm")
EMBEDDED_FACTORY = "autotune.engines.embedded.engine:EmbeddedEngine"


def check_engine(name: str) -> None:
    """ConfigurationError for an unknown engine; for ``trtllm`` without TensorRT-LLM installed,
    :class:`~autotune.engines.trtllm.TensorRtLlmNotInstalledError`, for ``vllm`` without vLLM,
    :class:`~autotune.engines.vllm.VllmNotInstalledError` (nothing is started)."""
    if name not in ENGINES:
        raise ConfigurationError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    if name == "trtllm":
        from autotune.engines.trtllm import require_tensorrt_llm

        require_tensorrt_llm()
    if name == "vllm":
        from autotune.engines.vllm import require_vllm

        require_vllm()


def folder_support(name: str) -> FolderSupport:
    """Which Hugging Face model folders engine ``name`` runs, for the preflight; ConfigurationError
    for an engine that does not run such folders (the embedded one runs its own model files).
    Imports neither tensorrt_llm nor vllm: the rules are tables and config.json look-ups."""
    if name == "trtllm":
        from autotune.engines.trtllm.checks import TRTLLM_SUPPORT

        return TRTLLM_SUPPORT
    if name == "vllm":
        from autotune.engines.vllm.checks import VLLM_SUPPORT

        return VLLM_SUPPORT
    raise ConfigurationError(f"engine {name!r} does not run Hugging Face model folders; "
                             f"use --engine {' or '.join(FOLDER_ENGINES)}")


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
    if name == "embedded":
        from autotune.engines.embedded.engine import EmbeddedEngine

        return EmbeddedEngine(**kwargs)
    if name == "vllm":
        from autotune.engines.vllm.engine import VllmEngine

        return VllmEngine(**kwargs)
    from autotune.engines.trtllm.engine import TrtLlmEngine

    return TrtLlmEngine(**kwargs)


def engine_spec(name: str, **kwargs: Any) -> EngineSpec:
    """How an EngineWorker's child builds engine ``name`` (checked as :func:`check_engine` does).
    ``trtllm`` kwargs: target, max_batch_size (pass the largest batch size of the study, so one LLM
    serves every batch size), tensor_parallel_size, max_ngram, stats_timeout_s, models (the model
    folders already read, so that the worker reads none again); ``vllm`` kwargs: target,
    max_batch_size (likewise), max_ngram, enforce_eager, models."""
    check_engine(name)
    if name == "embedded":
        return EngineSpec(EMBEDDED_FACTORY, kwargs)
    if name == "vllm":
        from autotune.engines.vllm.engine import runner_spec as vllm_runner_spec

        return vllm_runner_spec(**kwargs)
    from autotune.engines.trtllm.engine import runner_spec

    return runner_spec(**kwargs)
