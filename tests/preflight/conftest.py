"""Fixtures of the preflight tests: model folders (see tests/hf_model_factory.py) and GPU profiles."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from autotune.hardware.profile import HardwareProfile


@pytest.fixture
def gpu() -> Callable[[int], HardwareProfile]:
    """A hardware profile of one GPU with ``memory_bytes`` of memory."""

    def make(memory_bytes: int) -> HardwareProfile:
        device = {"index": 0, "name": "Test GPU", "memory_total_bytes": memory_bytes}
        return HardwareProfile("f" * 16, "test-gpu", "cuda", 1, {"devices": [device], "benchmarked_device": 0}, ())

    return make
