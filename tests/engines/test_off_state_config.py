"""K = 0 inside a speculative server as a configuration (issue 26 item D): an EngineConfig with
``off_state`` is a speculative method at depth 0, which vLLM's mapping runs as the drafter at draft
length 1 under a schedule of 0 at every concurrency; the decisions never take such a row."""

from __future__ import annotations

import pytest

from autotune.analysis import decision
from autotune.engines.base import EngineConfig
from autotune.analysis.offstate import OFF_STATE_KEY
from autotune.engines.vllm.mapping import engine_arguments
from autotune.errors import ConfigurationError
from autotune.search.space import Candidate
from autotune.store.results import TrialRow


def test_the_off_state_is_a_speculative_method_at_depth_0() -> None:
    EngineConfig("draft", 0, "/d", off_state=True).validate()
    assert EngineConfig("draft", 0, "/d", off_state=True).label() == "draft@0"
    for bad in (EngineConfig("none", 0, off_state=True), EngineConfig("mtp", 2, off_state=True)):
        with pytest.raises(ConfigurationError, match="off state"):
            bad.validate()
    with pytest.raises(ConfigurationError, match="needs depth >= 1"):
        EngineConfig("mtp", 0).validate()  # depth 0 without the flag stays an error
    assert Candidate("draft", 0, 4, "small").engine_config({"small": "/d"}) == EngineConfig("draft", 0, "/d", True)
    assert not Candidate("none", 0, 4).engine_config({}).off_state


@pytest.mark.parametrize(("method", "draft", "expected"), [
    ("draft", "/models/draft", {"method": "draft_model", "model": "/models/draft"}),
    ("ngram", None, {"method": "ngram", "prompt_lookup_max": 3, "prompt_lookup_min": 1}),
])
def test_vllm_runs_it_as_the_drafter_under_a_schedule_of_0(method: str, draft: str | None, expected: dict) -> None:
    arguments = engine_arguments(EngineConfig(method, 0, draft, off_state=True), "/models/target", 8, "draft_target")
    spec = arguments["speculative_config"]
    assert spec == {**expected, "num_speculative_tokens": 1, "num_speculative_tokens_per_batch_size": [[1, 1, 0]]}


def row(method: str, depth: int, tokens_per_s: float, off_state: bool = False) -> TrialRow:
    return TrialRow(phase="screening", trial_number=depth, method=method, depth=depth, concurrency=4, state="complete",
                    tokens_per_s=tokens_per_s, extra={OFF_STATE_KEY: True} if off_state else {})


def test_a_k_0_row_never_decides() -> None:
    rows = [row("none", 0, 100.0), row("draft", 2, 90.0), row("draft", 0, 500.0, off_state=True)]
    assert [r.depth for r in decision.deciding_rows(rows)] == [0, 2]
    assert decision.decide_at(decision.deciding_rows(rows), 4).recommended.method == "none"
    assert len(decision.complete(rows)) == 3  # still there for the off state's price (serving/off_depths.py)
