"""Engines run speculative-decoding configurations and measure them.

``base`` defines the interface (no torch import); ``embedded`` is our PyTorch engine, imported
only when used.
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
