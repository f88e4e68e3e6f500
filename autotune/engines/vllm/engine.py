"""VllmEngine: the :class:`~autotune.engines.base.Engine` for vLLM, on the caller's side.

An :class:`~autotune.engines.isolated.IsolatedEngine` whose worker hosts
:class:`~autotune.engines.vllm.runner.VllmRunner`. This module never imports ``vllm``; it only
checks, at construction, that it is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from autotune.engines.isolated import IsolatedEngine
from autotune.engines.limits import DEFAULT_MAX_NGRAM
from autotune.engines.vllm import require_vllm
from autotune.engines.vllm.checks import check_config
from autotune.engines.worker import EngineSpec
from autotune.errors import ConfigurationError
from autotune.models.folder import HfModel, ModelFolders

RUNNER_FACTORY = "autotune.engines.vllm.runner:VllmRunner"
# A call may start a `vllm serve` (weights loaded, the model compiled, the engine core and API server
# up): 30-120 s for the built-in models on our CPU, minutes for a large model on a GPU.
DEFAULT_TIMEOUT_S = 1800.0


def runner_spec(
    target: str | Path,
    max_batch_size: int | None = None,
    max_ngram: int = DEFAULT_MAX_NGRAM,
    enforce_eager: bool | None = None,
    dtype: str | None = None,
    models: Sequence[HfModel] = (),
) -> EngineSpec:
    """How a worker process builds the runner (also what the tuner hands its EngineWorker).
    Raises at once when vLLM is missing or ``target`` is not a model folder. ``models``: the model
    folders already read (the tuner's preflight read them), handed on to the worker so that it reads
    none of them again; the target is read here when it is not among them."""
    require_vllm()
    folders = ModelFolders(models)
    folders.get(target, "target")
    if max_batch_size is not None and (not isinstance(max_batch_size, int) or max_batch_size < 1):
        raise ConfigurationError(f"max_batch_size must be an integer >= 1, got {max_batch_size!r}")
    return EngineSpec(RUNNER_FACTORY, {
        "target": str(Path(target).resolve()), "max_batch_size": max_batch_size, "max_ngram": max_ngram,
        "enforce_eager": enforce_eager, "dtype": dtype, "models": tuple(folders),
    })


class VllmEngine(IsolatedEngine):
    """Measures configurations with vLLM, in a worker process.

    ``target``: a Hugging Face model folder; drafts (method draft) are folders too. ``max_batch_size``:
    the largest concurrency that will be measured (one server serves every concurrency up to it; None:
    started for the first, again when a larger one comes). ``timeout_s``: limit per call (a server's
    start included); ``dtype``: see :class:`~autotune.engines.vllm.runner.VllmRunner`. The protocol
    (:meth:`measure_repeatedly`) keeps every configuration's server up on a CPU, so its rounds alternate
    without starting them again.
    """

    name = "vllm"

    def __init__(
        self,
        target: str | Path,
        max_batch_size: int | None = None,
        max_ngram: int = DEFAULT_MAX_NGRAM,
        enforce_eager: bool | None = None,
        dtype: str | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
    ) -> None:
        spec = runner_spec(target, max_batch_size, max_ngram, enforce_eager, dtype)
        folders = ModelFolders(spec.kwargs["models"])
        super().__init__(spec, lambda config: check_config(config, spec.kwargs["target"], folders), timeout_s)
