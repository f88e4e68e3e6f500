"""TrtLlmEngine: the :class:`~autotune.engines.base.Engine` for TensorRT-LLM, on the caller's side.

Every configuration is measured in a worker process of its own
(:class:`~autotune.engines.worker.EngineWorker` hosting :class:`~autotune.engines.trtllm.runner.
TrtLlmRunner`): the LLM built there is reused across batch sizes while the configuration stays, and
the process is replaced when it changes, so a crash, hang or CUDA out-of-memory comes back as a
:class:`~autotune.engines.worker.WorkerFailure` and the caller carries on. This module never
imports ``tensorrt_llm``; it only checks, at construction, that it is installed.
"""

from __future__ import annotations

from pathlib import Path

from autotune.engines.base import EngineConfig, Measurement, validate_run_options
from autotune.engines.protocol import ProtocolOptions, ProtocolResult
from autotune.engines.trtllm import require_tensorrt_llm
from autotune.engines.trtllm.checks import check_config
from autotune.engines.trtllm.mapping import DEFAULT_MAX_NGRAM
from autotune.engines.trtllm.stats import STATS_TIMEOUT_S
from autotune.engines.worker import EngineSpec, EngineWorker
from autotune.errors import ConfigurationError, EngineError
from autotune.preflight.models import read_config
from autotune.workload import Workload

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
) -> EngineSpec:
    """How a worker process builds the runner (also what the tuner hands its EngineWorker).
    Raises at once when TensorRT-LLM is missing or ``target`` is not a model folder."""
    require_tensorrt_llm()
    read_config(target, "target")
    if max_batch_size is not None and (not isinstance(max_batch_size, int) or max_batch_size < 1):
        raise ConfigurationError(f"max_batch_size must be an integer >= 1, got {max_batch_size!r}")
    return EngineSpec(RUNNER_FACTORY, {
        "target": str(Path(target).resolve()), "max_batch_size": max_batch_size,
        "tensor_parallel_size": tensor_parallel_size, "max_ngram": max_ngram, "stats_timeout_s": stats_timeout_s,
    })


class TrtLlmEngine:
    """Measures configurations with TensorRT-LLM's PyTorch backend, one worker process per configuration.

    ``target``: a Hugging Face model folder. ``max_batch_size``: the largest batch size that will be
    measured (the LLM is built for it once; None: built for the first batch size, rebuilt when a
    larger one comes). ``timeout_s``: limit per call (LLM build included). ``stats_timeout_s``: how
    long a run waits for further iteration statistics after the last one (twice per measurement).
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
        self.target = spec.kwargs["target"]
        self.config: EngineConfig | None = None
        self._worker = EngineWorker(spec, timeout_s=timeout_s)

    @property
    def loads(self) -> int:
        """LLMs built so far (over every worker process)."""
        return self._worker.loads

    @property
    def worker_starts(self) -> int:
        return self._worker.starts

    def load(self, config: EngineConfig) -> None:
        """Check ``config`` against the model folders; the worker builds it on the next measure."""
        check_config(config, self.target)
        self.config = config

    def measure(self, workload: Workload, batch_size: int, temperature: float | None = None, seed: int = 0) -> Measurement:
        """Run ``workload`` with ``batch_size`` requests in flight (WorkerFailure when the worker fails)."""
        if self.config is None:
            raise EngineError("no configuration loaded; call load(config) before measure()")
        validate_run_options(batch_size, temperature)
        return self._worker.measure(self.config, workload, batch_size, temperature, seed)

    def measure_repeatedly(
        self, configs: list[EngineConfig], workload: Workload, batch_size: int, temperature: float | None = None,
        seed: int = 0, options: ProtocolOptions | None = None,
    ) -> ProtocolResult:
        """The measurement protocol run inside one worker process (the baseline included), so the
        rounds alternate configurations there instead of restarting a worker at every switch. Each
        switch still builds that configuration's LLM (one LLM at a time fits on the GPU), so a round
        costs one build per configuration: keep ``max_repetitions`` small for large models."""
        for config in configs:
            check_config(config, self.target)
        validate_run_options(batch_size, temperature)
        return self._worker.measure_repeatedly(list(configs), workload, batch_size, temperature, seed, options)

    def close(self) -> None:
        """Stop the worker process (and with it the LLM)."""
        self._worker.stop()
