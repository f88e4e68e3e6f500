"""Engines by name: ``create_engine("embedded" | "trtllm", ...)`` for measuring in this process's
caller, ``engine_spec(...)`` for an :class:`~autotune.engines.worker.EngineWorker` (the tuner).

Importing this module loads neither torch nor tensorrt_llm: each engine is imported when created.
"""

from __future__ import annotations

from typing import Any

from autotune.engines.base import Engine
from autotune.engines.worker import EngineSpec
from autotune.errors import ConfigurationError

ENGINES = ("embedded", "trtllm")
EMBEDDED_FACTORY = "autotune.engines.embedded.engine:EmbeddedEngine"


def check_engine(name: str) -> None:
    """ConfigurationError for an unknown engine; for ``trtllm`` without TensorRT-LLM installed,
    :class:`~autotune.engines.trtllm.TensorRtLlmNotInstalledError` (nothing is started)."""
    if name not in ENGINES:
        raise ConfigurationError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    if name == "trtllm":
        from autotune.engines.trtllm import require_tensorrt_llm

        require_tensorrt_llm()


def create_engine(name: str, **kwargs: Any) -> Engine:
    """The engine called ``name``, built with ``kwargs``.

    ``embedded``: :class:`~autotune.engines.embedded.engine.EmbeddedEngine` (target, device, dtype,
    max_ngram), in this process. ``trtllm``: :class:`~autotune.engines.trtllm.engine.TrtLlmEngine`
    (target, max_batch_size, tensor_parallel_size, max_ngram, timeout_s, stats_timeout_s), measuring in worker
    processes; fails at once when TensorRT-LLM is not installed.
    """
    check_engine(name)
    if name == "embedded":
        from autotune.engines.embedded.engine import EmbeddedEngine

        return EmbeddedEngine(**kwargs)
    from autotune.engines.trtllm.engine import TrtLlmEngine

    return TrtLlmEngine(**kwargs)


def engine_spec(name: str, **kwargs: Any) -> EngineSpec:
    """How an EngineWorker's child builds engine ``name`` (checked as :func:`check_engine` does).
    ``trtllm`` kwargs: target, max_batch_size (pass the largest batch size of the study, so one LLM
    serves every batch size), tensor_parallel_size, max_ngram, stats_timeout_s."""
    check_engine(name)
    if name == "embedded":
        return EngineSpec(EMBEDDED_FACTORY, kwargs)
    from autotune.engines.trtllm.engine import runner_spec

    return runner_spec(**kwargs)
