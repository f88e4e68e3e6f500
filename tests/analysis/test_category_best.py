"""Whether the best configuration differs between request categories beyond the noise
(autotune.analysis.category_best)."""

from __future__ import annotations

import pytest

from autotune.analysis.category_best import best_on_categories, category_lines, on_category
from autotune.analysis.intervals import Estimate
from autotune.engines.base import EngineConfig
from autotune.engines.embedded.engine import EmbeddedEngine
from autotune.engines.protocol import ProtocolOptions, measure_repeatedly
from autotune.engines.base import RunShape
from autotune.search.confirm import row_fields
from autotune.store.results import TrialRow
from autotune.workload import Request, Workload, shipped_workload


def entry(value: float, half: float | None, requests: int = 4, tokens: int = 120) -> dict:
    return {"value": value, "low": None if half is None else value - half, "high": None if half is None else value + half,
            "n": 4, "requests": requests, "decode_tokens": tokens, "decode_steps": round(tokens / value)}


def row(number: int, method: str, depth: int, tokens_per_s: float, categories: dict, half: float | None = 0.02) -> TrialRow:
    """A confirmation row as the store reads it back (record_trial + trial_row: its measurement's
    extra facts under extra["measurement"], its interval under intervals)."""
    intervals = {} if half is None else {"tokens_per_s": Estimate(tokens_per_s, tokens_per_s * (1 - half),
                                                                  tokens_per_s * (1 + half), 3).to_dict()}
    return TrialRow(trial_number=number, method=method, depth=depth, concurrency=2, state="complete",
                    tokens_per_s=tokens_per_s, phase="confirmation", repetitions=3, intervals=intervals,
                    extra={"measurement": {"acceptance_by_category": categories}, "confirmation": {"run": 1}})


def test_a_configuration_that_wins_on_one_category_and_loses_on_the_other_is_said():
    # deep drafting pays on code (4 tokens per pass) and costs on chat (1.2); ngram@2 is steady.
    deep = row(1, "draft", 6, 300.0, {"code": entry(4.0, 0.1), "chat": entry(1.2, 0.05)})
    steady = row(2, "ngram", 2, 280.0, {"code": entry(2.0, 0.05), "chat": entry(1.8, 0.05)})
    best = best_on_categories([deep, steady], 2)
    assert {name: r.config_label for name, (r, _) in best.items()} == {"code": "draft@6", "chat": "ngram@2"}
    lines = category_lines([deep, steady], 2, deep)
    assert len(lines) == 2
    assert lines[0].startswith("The best configuration differs by category at concurrency 2: on chat ngram@2")
    assert "beats draft@6, the best on code" in lines[0] and "beyond the noise" in lines[0]


def test_within_the_noise_or_without_intervals_nothing_is_said_but_a_split_acceptance_is():
    deep = row(1, "draft", 6, 300.0, {"code": entry(4.0, 0.1), "chat": entry(1.2, 0.05)}, half=0.6)
    steady = row(2, "ngram", 2, 280.0, {"code": entry(2.0, 0.05), "chat": entry(1.8, 0.05)}, half=0.6)
    lines = category_lines([deep, steady], 2, deep)
    assert len(lines) == 1 and lines[0].startswith("draft@6 c2: acceptance differs by category beyond the noise: code 4")
    screening = [row(1, "draft", 6, 300.0, {"code": entry(4.0, 0.1), "chat": entry(1.2, 0.05)}, half=None)]
    assert on_category(screening[0], "code").has_interval is False
    assert category_lines([row(1, "draft", 6, 300.0, {"code": entry(2.0, 0.1), "chat": entry(1.9, 0.1)})], 2) == []
    assert category_lines([row(1, "none", 0, 100.0, {})], 2) == []


@pytest.mark.slow  # two interleaved rounds of three configurations
def test_figures_per_category_from_the_protocol():
    code = [Request(r.prompt, 16, 0.0, "code") for r in shipped_workload("code").requests[:3]]
    chat = [Request(r.prompt, 16, 0.0, r.category) for r in shipped_workload("chat").requests[:3]]
    engine = EmbeddedEngine()
    try:
        result = measure_repeatedly(engine, [EngineConfig("draft", 3), EngineConfig("ngram", 3)],
                                    RunShape(Workload("m", tuple(code + chat)), 2),
                                    options=ProtocolOptions(min_repetitions=2, max_repetitions=2, measure_under_load=True))
    finally:
        engine.close()
    rows = []
    for number, measured in enumerate(result.measurements):
        fields = row_fields(measured)
        rows.append(TrialRow(trial_number=number, method=measured.config.method, depth=measured.config.depth,
                             concurrency=2, state="complete", tokens_per_s=fields["measurement"]["tokens_per_s"],
                             phase="confirmation", repetitions=fields["repetitions"], intervals=fields["intervals"],
                             extra={**fields["extra"], "measurement": fields["measurement"], "confirmation": {"run": 1}}))
    for r in rows:
        categories = r.extra["measurement"]["acceptance_by_category"]
        assert set(categories) == {"code", "chat"}
        pooled = sum(e["decode_tokens"] for e in categories.values()) / sum(e["decode_steps"] for e in categories.values())
        for name, values in categories.items():
            figure = on_category(r, name)
            assert figure.value == pytest.approx(r.tokens_per_s * values["value"] / pooled)
            assert figure.has_interval and figure.low < figure.value < figure.high
    assert all(isinstance(line, str) for line in category_lines(rows, 2, rows[1]))
    assert set(best_on_categories(rows, 2)) == {"code", "chat"}
