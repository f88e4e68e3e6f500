"""The one memory margin: 10 % of the device kept back, as vLLM and TensorRT-LLM do by default."""

from __future__ import annotations

from autotune.models.fit import MEMORY_MARGIN, largest_concurrency, usable_bytes


def test_largest_batch() -> None:
    assert largest_concurrency(1000, 100, 300) == 3
    assert largest_concurrency(1000, 990, 300) == 0
    assert largest_concurrency(1000, 2000, 300) == 0


def test_usable_bytes_keep_the_engines_default_margin() -> None:
    assert MEMORY_MARGIN == 0.1
    assert usable_bytes(1000) == 900
