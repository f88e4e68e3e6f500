"""The TensorRT-LLM engine (PyTorch backend): the LLM API run in an isolated worker process.

``tensorrt_llm`` is imported only inside that worker (:mod:`autotune.engines.trtllm.runner`);
importing this package, :mod:`~autotune.engines.trtllm.mapping` or
:mod:`~autotune.engines.trtllm.engine` never does. :func:`require_tensorrt_llm` checks that the
package is installed without importing it (importing needs a CUDA driver).
"""

from __future__ import annotations

import importlib.util

from autotune.errors import EngineError

INSTALL_HINT = (
    "install it on a Linux machine with an NVIDIA GPU: sudo apt-get install libopenmpi-dev && "
    "pip3 install tensorrt_llm (older releases: add --extra-index-url https://pypi.nvidia.com); see docs/trtllm.md"
)


class TensorRtLlmNotInstalledError(EngineError):
    """``--engine trtllm`` was asked for, but the ``tensorrt_llm`` package is not installed."""


def require_tensorrt_llm() -> None:
    """Raise :class:`TensorRtLlmNotInstalledError` at once when ``tensorrt_llm`` cannot be imported."""
    if importlib.util.find_spec("tensorrt_llm") is None:
        raise TensorRtLlmNotInstalledError(f"--engine trtllm needs TensorRT-LLM, which is not installed; {INSTALL_HINT}")
