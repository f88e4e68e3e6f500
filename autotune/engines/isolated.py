"""IsolatedEngine: the caller's side of an engine that measures in a worker process of its own.

TensorRT-LLM and vLLM start processes of their own, hold GPU memory that only a process exit
reliably frees, and can crash or hang the process they run in. Every configuration is therefore
measured in an :class:`~autotune.engines.worker.EngineWorker`; the engines built there serve
every concurrency and the process lives across configurations (the runner decides which engines it
keeps), and is replaced after a failure, so a crash, hang or out-of-memory comes back as a
:class:`~autotune.engines.worker.WorkerFailure` and the caller carries on. This side never imports the engine's package.
"""

from __future__ import annotations

from collections.abc import Callable

from autotune.engines.base import EngineConfig, Measurement, validate_run_options
from autotune.engines.protocol import ProtocolOptions, ProtocolResult
from autotune.engines.worker import EngineSpec, EngineWorker
from autotune.errors import EngineError
from autotune.workload import Workload


class IsolatedEngine:
    """An :class:`~autotune.engines.base.Engine` whose runs happen in a worker built from ``spec``.

    ``check``: validates a configuration against the model folders in this process (raises
    UnsupportedConfigError / ConfigurationError), so a bad one fails before any process starts.
    ``timeout_s``: limit per call (the engine's build included).
    """

    name = "isolated"

    def __init__(self, spec: EngineSpec, check: Callable[[EngineConfig], object], timeout_s: float | None) -> None:
        self.target = spec.kwargs["target"]
        self.config: EngineConfig | None = None
        self._check = check
        self._worker = EngineWorker(spec, timeout_s=timeout_s)

    @property
    def loads(self) -> int:
        """Engines built so far (over every worker process)."""
        return self._worker.loads

    @property
    def worker_starts(self) -> int:
        return self._worker.starts

    def load(self, config: EngineConfig) -> None:
        """Check ``config`` against the model folders; the worker builds it on the next measure."""
        self._check(config)
        self.config = config

    def measure(self, workload: Workload, concurrency: int, temperature: float | None = None, seed: int = 0) -> Measurement:
        """Run ``workload`` with ``concurrency`` requests in flight (WorkerFailure when the worker fails)."""
        if self.config is None:
            raise EngineError("no configuration loaded; call load(config) before measure()")
        validate_run_options(concurrency, temperature)
        return self._worker.measure(self.config, workload, concurrency, temperature, seed)

    def measure_repeatedly(
        self, configs: list[EngineConfig], workload: Workload, concurrency: int, temperature: float | None = None,
        seed: int = 0, options: ProtocolOptions | None = None, notice: Callable[[str], None] | None = None,
    ) -> ProtocolResult:
        """The measurement protocol run inside one worker process (the baseline included), so the
        rounds alternate configurations there instead of restarting a worker at every switch;
        ``notice`` gets each discarded round's line as it happens."""
        for config in configs:
            self._check(config)
        validate_run_options(concurrency, temperature)
        return self._worker.measure_repeatedly(list(configs), workload, concurrency, temperature, seed, options, notice)

    def close(self) -> None:
        """Stop the worker process (and with it the engine)."""
        self._worker.stop()
