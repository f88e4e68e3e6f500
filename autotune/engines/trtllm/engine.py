"""TrtLlmEngine: the :class:`~autotune.engines.base.Engine` for TensorRT-LLM, on the caller's side.

An :class:`~autotune.engines.isolated.IsolatedEngine` whose worker hosts
:class:`~autotune.engines.trtllm.runner.TrtLlmRunner`. This module never imports ``tensorrt_llm``;
it only checks, at construction, that it is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from autotune.engines.isolated import IsolatedEngine
from autotune.engines.limits import DEFAULT_MAX_NGRAM
from autotune.engines.trtllm import require_tensorrt_llm
from autotune.engines.trtllm.checks import check_config
from autotune.engines.trtllm.stats import STATS_TIMEOUT_S
from autotune.engines.worker import EngineSpec
from autotune.errors import ConfigurationError
from autotune.models.folder import HfModel, ModelFolders

RUNNER_FACTORY = "autotune.engines.trtllm.runner:TrtLlmRunner"
# Building an LLM loads the weights, captures CUDA graphs and runs TensorRT-LLM's kernel autotuner:
# minutes for a large model, so the per-call limit is generous.
DEFAULT_TIMEOUT_S = 1800.0


def runner_spec(
    target: str | Path,
    max_batch_size: int | None = None,
    tensor_parallel_size: int = 1,
    max_ngram: int = DEFAULT_MAX_NGRAM,
    stats_timeout_s: float = STATS_TIMEOUT_S,
    models: Sequence[HfModel] = (),
) -> EngineSpec:
    """How a worker process builds the runner (also what the tuner hands its EngineWorker).
    Raises at once when TensorRT-LLM is missing or ``target`` is not a model folder. ``models``: the
    model folders already read (the tuner's preflight read them), handed on to the worker so that it
    reads none of them again; the target is read here when it is not among them."""
    require_tensorrt_llm()
    folders = ModelFolders(models)
    folders.get(target, "target")
    if max_batch_size is not None and (not isinstance(max_batch_size, int) or max_batch_size < 1):
        raise ConfigurationError(f"max_batch_size must be an integer >= 1, got {max_batch_size!r}")
    return EngineSpec(RUNNER_FACTORY, {
        "target": str(Path(target).resolve()), "max_batch_size": max_batch_size,
        "tensor_parallel_size": tensor_parallel_size, "max_ngram": max_ngram, "stats_timeout_s": stats_timeout_s,
        "models": tuple(folders),
    })


class TrtLlmEngine(IsolatedEngine):
    """Measures configurations with TensorRT-LLM's PyTorch backend, in a worker process that builds
    one LLM at a time and lives across configurations.

    ``target``: a Hugging Face model folder. ``max_batch_size``: the largest concurrency that will be
    measured (the LLM is built for it once; None: built for the first concurrency, rebuilt when a
    larger one comes). ``timeout_s``: limit per call (LLM build included). ``stats_timeout_s``: how
    long a run waits for further iteration statistics after the last one (twice per measurement).
    The protocol (:meth:`measure_repeatedly`) builds each configuration's LLM at every switch (one
    LLM at a time fits on the GPU), so a round costs one build per configuration: keep
    ``max_repetitions`` small for large models.
    """

    name = "trtllm"

    def __init__(
        self,
        target: str | Path,
        max_batch_size: int | None = None,
        tensor_parallel_size: int = 1,
        max_ngram: int = DEFAULT_MAX_NGRAM,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        stats_timeout_s: float = STATS_TIMEOUT_S,
    ) -> None:
        spec = runner_spec(target, max_batch_size, tensor_parallel_size, max_ngram, stats_timeout_s)
        folders = ModelFolders(spec.kwargs["models"])
        super().__init__(spec, lambda config: check_config(config, spec.kwargs["target"], folders), timeout_s)
