"""Acceptance per request category (autotune.analysis.categories), from real embedded-engine runs."""

from __future__ import annotations

import math

import pytest

from autotune.analysis.categories import UNCATEGORIZED, acceptance_by_category, decode_steps, ratio_estimate
from autotune.analysis.steady import request_stream
from autotune.engines.base import EngineConfig, Measurement
from autotune.engines.embedded.engine import EmbeddedEngine
from autotune.workload import Request, Workload, shipped_workload

MAX_TOKENS = 16


def mixed_workload() -> Workload:
    """Three code prompts (the built-in workload's, labelled), three prose and two chat ones, short."""
    code = [Request(r.prompt, MAX_TOKENS, 0.0, "code") for r in shipped_workload("code").requests[:3]]
    prose = [Request(r.prompt, MAX_TOKENS, 0.0, r.category) for r in shipped_workload("prose").requests[:3]]
    chat = [Request(r.prompt, MAX_TOKENS, 0.0, r.category) for r in shipped_workload("chat").requests[:2]]
    return Workload("mixed", tuple(code + prose + chat))


@pytest.fixture(scope="module")
def ngram_run() -> tuple[Workload, Measurement]:
    engine = EmbeddedEngine()
    engine.load(EngineConfig("ngram", 3))
    workload = mixed_workload()
    try:
        return workload, engine.measure(request_stream(workload, 2), 2)
    finally:
        engine.close()


def test_a_mixed_run_has_acceptance_per_category_with_intervals(ngram_run):
    workload, measurement = ngram_run
    by_category = measurement.acceptance_by_category
    assert set(by_category) == {"code", "prose", "chat"}
    counts = {"code": 3, "prose": 3, "chat": 2}
    for name, entry in by_category.items():
        assert entry["n"] == counts[name]  # distinct prompts
        assert entry["requests"] % counts[name] == 0 and entry["requests"] >= counts[name]
        assert entry["decode_tokens"] == entry["requests"] * (MAX_TOKENS - 1)  # no EOS in the byte models
        assert 1 <= entry["value"] == pytest.approx(entry["decode_tokens"] / entry["decode_steps"])
        assert entry["low"] is not None and 1 <= entry["low"] <= entry["value"] <= entry["high"]
    # Pooled over the categories, the split adds up to the run: every token after a request's first
    # came in a decode step, and no row emits more than depth + 1 tokens in one.
    tokens = sum(e["decode_tokens"] for e in by_category.values())
    steps = sum(e["decode_steps"] for e in by_category.values())
    assert tokens == measurement.output_tokens - measurement.n_requests
    assert tokens / steps <= measurement.acceptance_length <= 3 + 1
    assert steps <= measurement.sequence_steps


def test_it_is_stored_through_to_dict(ngram_run):
    _, measurement = ngram_run
    again = Measurement.from_dict(measurement.to_dict())
    assert again.acceptance_by_category == measurement.acceptance_by_category


def test_a_workload_without_categories_gets_none():
    engine = EmbeddedEngine()
    engine.load(EngineConfig("ngram", 2))
    workload = shipped_workload("code").head(2).with_max_tokens(4)
    assert engine.measure(workload, 1).acceptance_by_category is None
    engine.close()


def test_decode_steps_are_distinct_arrival_times_after_the_first():
    assert decode_steps([]) == decode_steps([0.1]) == 0
    assert decode_steps([0.1, 0.2, 0.2, 0.2, 0.3]) == 2
    assert decode_steps([0.1, 0.1, 0.2]) == 2  # a first chunk carrying a decode step's token too


def test_copies_of_a_prompt_are_one_observation_and_uncategorized_requests_are_counted():
    a, b = Request("a", 5, 0.0, "code"), Request("b", 5)
    result = acceptance_by_category(["code", "code", None], [a, a, b], [5, 5, 3],
                                    [[0, 1, 1, 2, 2], [0, 1, 1, 2, 2], [0, 1, 2]])
    assert result["code"]["n"] == 1 and result["code"]["requests"] == 2 and result["code"]["low"] is None
    assert result["code"]["value"] == 2.0 and result[UNCATEGORIZED]["value"] == 1.0
    assert acceptance_by_category([None, None], [a, b], [1, 1], [[0], [0]]) is None


def test_ratio_estimate_matches_the_textbook_formula():
    pairs = [(30, 10), (20, 10), (45, 15), (10, 8)]
    estimate = ratio_estimate(pairs)
    ratio = 105 / 43
    se = math.sqrt(sum((y - ratio * x) ** 2 for y, x in pairs) / (4 * 3)) / (43 / 4)
    assert estimate.value == pytest.approx(ratio)
    assert estimate.high - estimate.value == pytest.approx(3.182446 * se, rel=1e-5)
    assert ratio_estimate([(0, 0)]).value == 1.0
