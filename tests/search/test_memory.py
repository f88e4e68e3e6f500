"""Memory-fit concurrency levels: the estimate bounds what the engine allocates; what does not fit is infeasible."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autotune.engines.base import EngineConfig
from autotune.engines.embedded.engine import EmbeddedEngine
from autotune.errors import ConfigurationError
from autotune.models.fit import MEMORY_MARGIN
from autotune.search.memory import CPU_MAX_DEFAULT_CONCURRENCY, default_concurrencies
from autotune.search.setup import set_up_study
from autotune.workload import Request, Workload


@pytest.fixture
def memory(options):
    return set_up_study(options).memory


@pytest.mark.parametrize(("method", "depth"), [("none", 0), ("mtp", 2), ("draft", 2)])
def test_estimate_bounds_the_engines_own_count(options, models, memory, method, depth) -> None:
    engine = EmbeddedEngine(models["target"])
    engine.load(EngineConfig(method, depth, models["draft"] if method == "draft" else None))
    measured = engine.measure(options.workload, 2).peak_memory_bytes  # weights + caches + buffers
    estimate = memory.required_bytes(method, depth, 2, "draft" if method == "draft" else None)
    assert measured <= estimate <= 1.5 * measured


def test_default_concurrencies_are_powers_of_two_capped_on_cpu(memory) -> None:
    assert default_concurrencies(memory, "cpu") == (1, 2, 4, 8)
    assert CPU_MAX_DEFAULT_CONCURRENCY == 8
    assert default_concurrencies(memory, "cuda") == (1, 2, 4, 8, 16, 32, 64)


def test_default_concurrencies_stop_where_the_baseline_stops_fitting(memory) -> None:
    fits_two = memory.required_bytes("none", 0, 2)
    small = replace(memory, device_bytes=int(fits_two / (1 - MEMORY_MARGIN)) + 1)
    assert default_concurrencies(small, "cpu") == (1, 2)
    tiny = replace(memory, device_bytes=memory.target.weight_bytes)
    with pytest.raises(ConfigurationError, match="does not fit on this device even at concurrency 1"):
        default_concurrencies(tiny, "cpu")


def test_speculative_configurations_that_do_not_fit_are_infeasible(memory) -> None:
    just_baseline = replace(memory, device_bytes=int(memory.required_bytes("none", 0, 2) / (1 - MEMORY_MARGIN)) + 1)
    assert just_baseline.infeasibility("none", 0, 2) is None
    reason = just_baseline.infeasibility("draft", 2, 2, "draft")
    assert reason is not None and "GiB" in reason and "concurrency 2" in reason


def test_sequences_longer_than_the_models_handle_are_infeasible(options, models) -> None:
    # 81 prompt tokens + 10 of the 96 positions; two requests, one per sequence of the study's concurrency 2
    long_workload = Workload("long", [Request("x" * 80, 10), Request("y" * 80, 10)])
    setup = set_up_study(replace(options, workload=long_workload))
    assert setup.memory.infeasibility("none", 0, 1) is None
    assert "handles 96" in setup.memory.infeasibility("mtp", 8, 1)


def test_the_plan_uses_the_profiles_memory(options, cpu_profile) -> None:
    setup = set_up_study(replace(options, concurrencies=None, hardware=cpu_profile(ram_bytes=64 << 30)))
    assert setup.memory.device_bytes == 64 << 30
    assert setup.space.concurrencies == (1, 2, 4, 8)  # a run cycles the workload's three requests


def test_concurrencies_at_which_not_even_the_baseline_fits_are_refused(options, cpu_profile) -> None:
    small = cpu_profile(ram_bytes=64 << 20)
    with pytest.raises(ConfigurationError, match=r"--concurrency 4096: the target alone needs ~.* GiB .* pass sizes up to"):
        set_up_study(replace(options, concurrencies=(1, 4096), hardware=small))
