"""Engines run speculative-decoding configurations and measure them.

:mod:`.base` defines the interface (a configuration, a measurement, an engine; no torch import),
:mod:`.protocol` the measurement protocol every engine shares (warm-up, alternating rounds against
the baseline, faults), :mod:`.worker` and :mod:`.isolated` the worker process an engine runs in,
:mod:`.limits` the defaults every engine is given alike. Each engine is a subpackage with an adapter
(:mod:`.adapter`: its capabilities, mapping, checks and off rule) found by name in :mod:`.registry`:
:mod:`.embedded` (our PyTorch engine), :mod:`.vllm` and :mod:`.trtllm`; each is imported only when
used.
"""

from autotune.engines.base import (
    BUILTIN_DRAFT,
    MAX_DEPTH,
    METHODS,
    SPECULATIVE_METHODS,
    Engine,
    EngineConfig,
    Measurement,
)

__all__ = [
    "BUILTIN_DRAFT",
    "MAX_DEPTH",
    "METHODS",
    "SPECULATIVE_METHODS",
    "Engine",
    "EngineConfig",
    "Measurement",
]
