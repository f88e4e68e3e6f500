"""Where a study found none fastest, what each engine's speculative server runs instead
(:mod:`autotune.serving.off_depths`, the adapters' ``off_rule``), and that the exports say it with the
measured figure or "unmeasured" (issue 26, item 1).

TensorRT-LLM: one-model MTP / EAGLE-3 never get a draft length of 0 nor ``max_concurrency`` (PR
#16888); two-model kinds may. vLLM: K = 0 runs the drafter, so 0 is written only where a row measured
it. The strict stand-in's refusal of the same is tested with the stand-in
(tests/engines/trtllm/test_trtllm_standin_yaml.py), which also loads these exports.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

import pytest
import yaml

import profile_factory as factory
from autotune import serving
from autotune.analysis.offstate import OFF_STATE_KEY
from autotune.engines.registry import ADAPTERS
from autotune.engines.trtllm.mapping import ONE_MODEL_KINDS, TRTLLM_OFF_RULE
from autotune.engines.trtllm.versions import TRTLLM_VERSIONS
from autotune.engines.vllm.mapping import VLLM_OFF_RULE
from autotune.models.kind import DRAFT_TARGET, EAGLE3
from autotune.serving.off_depths import off_state_report, off_states
from autotune.store.results import TrialRow

EAGLE3_CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 64}
KINDS = ("mtp", DRAFT_TARGET, EAGLE3, "ngram")
SHAPES = {  # concurrency -> depth of the profile's method (0: none won there)
    "constant-then-off": {1: 3, 2: 3, 4: 3, 8: 0},
    "scheduled-then-off": {1: 4, 2: 4, 4: 2, 8: 0, 16: 0},
}


def kind_profile(kind: str, shape: str, engine: str = "embedded", measurements: tuple = ()):  # noqa: ANN201
    """A profile of speculative ``kind`` whose table follows ``shape``, studied on ``engine``."""
    method = "draft" if kind in (DRAFT_TARGET, EAGLE3) else kind
    depths = SHAPES[shape]
    table = {b: (method, d) if d else ("none", 0) for b, d in depths.items()}
    profile = factory.profile_data(method, depths[1], 1, table, measurements=measurements)
    if kind == EAGLE3:
        profile = replace(profile, draft=replace(profile.draft, name="eagle3-head", config=EAGLE3_CONFIG))
    return replace(profile, study=replace(profile.study, engine=engine))


def row(method: str, depth: int, concurrency: int, tokens: float, *, number: int = 0, speedup: tuple | None = None,
        off: bool = False) -> TrialRow:
    """A confirmation row of run 1; ``speedup``: (value, low, high) over n = 5, paired with none."""
    intervals = {}
    if speedup is not None:
        value, low, high = speedup
        intervals["speedup"] = {"value": value, "low": low, "high": high, "n": 5, "confidence": 0.95}
    return TrialRow(trial_number=number, method=method, depth=depth, concurrency=concurrency, state="complete",
                    tokens_per_s=tokens, speedup=speedup[0] if speedup else (1.0 if method == "none" else None),
                    phase="confirmation", repetitions=5, intervals=intervals,
                    extra={"confirmation": {"run": 1}, **({OFF_STATE_KEY: True} if off else {})})


def trtllm_spec(profile, version: str) -> dict:  # noqa: ANN001
    return yaml.safe_load(serving.export_profile(profile, "trtllm", trtllm_version=version))["speculative_config"]


def vllm_spec(profile) -> dict:  # noqa: ANN001
    words = shlex.split(serving.export_profile(profile, "vllm").replace("\\\n", " ").split("exec ", 1)[1])
    return json.loads(words[words.index("--speculative-config") + 1])


def comment_lines(text: str) -> list[str]:
    return [line.removeprefix("# ") for line in text.splitlines() if line.startswith("#")]


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("version", TRTLLM_VERSIONS)
def test_no_one_model_export_holds_a_zero_or_max_concurrency(version: str, kind: str, shape: str) -> None:
    spec = trtllm_spec(kind_profile(kind, shape), version)
    zero_or_cap = "max_concurrency" in spec or 0 in (spec.get("draft_len_schedule") or {}).values()
    if kind in ONE_MODEL_KINDS:
        assert not zero_or_cap, spec
    else:  # two-model and n-gram kinds may still be switched off where none won
        assert zero_or_cap, spec


def test_the_rules_belong_to_the_adapters() -> None:
    assert ADAPTERS["trtllm"].off_rule is TRTLLM_OFF_RULE and ADAPTERS["vllm"].off_rule is VLLM_OFF_RULE
    assert ADAPTERS["embedded"].off_rule is None  # it serves nothing
    assert {TRTLLM_OFF_RULE.floor(kind) for kind in ONE_MODEL_KINDS} == {1}
    assert TRTLLM_OFF_RULE.floor(DRAFT_TARGET) == TRTLLM_OFF_RULE.floor("ngram") == 0
    assert "PR #16888" in TRTLLM_OFF_RULE.source and "llm_base_proposer.py" in VLLM_OFF_RULE.source


def test_trtllm_carries_the_measured_depth_1_figure_against_none() -> None:
    rows = (row("none", 0, 8, 800.0, number=0), row("mtp", 1, 8, 700.0, number=1, speedup=(0.875, 0.80, 0.95)),
            row("none", 0, 16, 1200.0, number=2))
    profile = kind_profile("mtp", "scheduled-then-off", engine="trtllm", measurements=rows)
    text = serving.export_profile(profile, "trtllm", trtllm_version="main")
    assert yaml.safe_load(text)["speculative_config"]["draft_len_schedule"] == {1: 4, 2: 4, 4: 2, 8: 1, 16: 1}
    lines = comment_lines(text)
    assert any(line.startswith("Where none won, what this TensorRT-LLM speculative server runs instead (")
               and "PR #16888" in line for line in lines)
    assert "  concurrency 8: draft length 1: mtp@1 0.88x [0.80, 0.95] vs none (n=5)" in lines
    assert "  concurrency 16: draft length 1: unmeasured (no row of mtp@1 at concurrency 16)" in lines


def test_a_screening_depth_1_row_is_carried_as_one_run_against_its_baseline() -> None:
    screened = (replace(row("none", 0, 8, 800.0), phase="screening", extra={}),
                replace(row("mtp", 1, 8, 600.0, number=1), phase="screening", extra={}))
    profile = kind_profile("mtp", "constant-then-off", engine="trtllm", measurements=screened)
    state = off_states(profile, TRTLLM_OFF_RULE)[8]
    assert (state.depth, state.label, state.vs_none.value, state.vs_none.has_interval) == (1, "mtp@1", 0.75, False)
    assert state.text() == "draft length 1: mtp@1 0.75x vs none (one run)"


def test_trtllm_two_model_keeps_its_zero_marked_unmeasured() -> None:
    profile = kind_profile(DRAFT_TARGET, "scheduled-then-off", engine="trtllm")
    assert trtllm_spec(profile, "1.2")["draft_len_schedule"] == {1: 4, 2: 4, 4: 2, 8: 0}
    state = off_states(profile, TRTLLM_OFF_RULE)[8]
    assert (state.depth, state.measured) == (0, False)
    assert state.why == "no row of K = 0 inside the server at concurrency 8"


def test_vllm_never_writes_an_unmeasured_zero() -> None:
    rows = (row("none", 0, 8, 800.0), row("mtp", 1, 8, 720.0, number=1, speedup=(0.9, 0.85, 0.95)))
    profile = kind_profile("mtp", "scheduled-then-off", engine="vllm", measurements=rows)
    assert vllm_spec(profile)["num_speculative_tokens_per_batch_size"] == [[1, 3, 4], [4, 7, 2], [8, 16, 1]]
    lines = comment_lines(serving.export_profile(profile, "vllm"))
    assert "  concurrency 8: draft length 1: mtp@1 0.90x [0.85, 0.95] vs none (n=5)" in lines
    assert "  concurrency 16: draft length 1: unmeasured (no row of mtp@1 at concurrency 16)" in lines


def test_vllm_writes_a_zero_range_only_with_a_measured_k0_figure_and_carries_it() -> None:
    k0 = row("mtp", 0, 8, 760.0, number=2, speedup=(0.95, 0.91, 0.99), off=True)
    rows = (row("none", 0, 8, 800.0), row("mtp", 1, 8, 720.0, number=1, speedup=(0.9, 0.85, 0.95)), k0)
    profile = kind_profile("mtp", "constant-then-off", engine="vllm", measurements=rows)
    assert vllm_spec(profile)["num_speculative_tokens_per_batch_size"] == [[1, 7, 3], [8, 8, 0]]
    assert "  concurrency 8: draft length 0: mtp@0 (K = 0 measured) 0.95x [0.91, 0.99] vs none (n=5)" in \
        comment_lines(serving.export_profile(profile, "vllm"))
    faster_one = (*rows[:2], replace(k0, tokens_per_s=700.0))  # measured both: the faster one is served
    profile = kind_profile("mtp", "constant-then-off", engine="vllm", measurements=faster_one)
    assert vllm_spec(profile)["num_speculative_tokens_per_batch_size"] == [[1, 7, 3], [8, 8, 1]]


def test_every_measured_depth_competes_with_k0_and_the_schedule_never_deepens_with_the_batch() -> None:
    """As in a vLLM study with a draft as large as its target: none won at 8 and 16, K = 0 cost half
    of none there, draft depth 3 only a tenth at 16 (the old rule weighed depth 1 alone against 0)."""
    rows = (row("none", 0, 8, 800.0), row("mtp", 0, 8, 400.0, number=1, speedup=(0.5, 0.45, 0.55), off=True),
            row("none", 0, 16, 1000.0, number=2), row("mtp", 3, 16, 900.0, number=3, speedup=(0.9, 0.85, 0.95)),
            row("mtp", 0, 16, 500.0, number=4, speedup=(0.5, 0.45, 0.55), off=True))
    profile = kind_profile("mtp", "scheduled-then-off", engine="vllm", measurements=rows)
    # 16 serves the measured depth 3; 8, where only K = 0 was measured, holds 16's depth 3 (unmeasured there)
    assert vllm_spec(profile)["num_speculative_tokens_per_batch_size"] == [[1, 3, 4], [4, 16, 3]]
    lines = comment_lines(serving.export_profile(profile, "vllm"))
    assert "  concurrency 16: draft length 3: mtp@3 0.90x [0.85, 0.95] vs none (n=5)" in lines
    assert "  concurrency 8: draft length 3: unmeasured (no row of mtp@3 at concurrency 8)" in lines


@pytest.mark.parametrize("kind", KINDS)
def test_a_profile_measured_on_another_engine_is_unmeasured_there(kind: str) -> None:
    rows = (row("none", 0, 8, 800.0), row("mtp", 1, 8, 720.0, number=1, speedup=(0.9, 0.85, 0.95)),
            row("mtp", 0, 8, 790.0, number=2, speedup=(0.99, 0.95, 1.02), off=True))
    profile = kind_profile(kind, "constant-then-off", engine="embedded", measurements=rows)
    for rule in (TRTLLM_OFF_RULE, VLLM_OFF_RULE):
        state = off_states(profile, rule)[8]
        assert not state.measured and state.why == f"the profile was measured on the embedded engine, not {rule.title}"
        assert state.depth == (0 if rule is TRTLLM_OFF_RULE and kind not in ONE_MODEL_KINDS else 1)
    assert 0 not in [depth for *_, depth in vllm_spec(profile)["num_speculative_tokens_per_batch_size"]]


def test_a_plan_is_unmeasured_everywhere() -> None:
    profile = kind_profile("mtp", "constant-then-off")
    profile = replace(profile, details={"predicted": True})
    assert off_states(profile, VLLM_OFF_RULE)[8].why == "predicted by autotune plan, never measured on vLLM"


def test_where_speculation_loses_at_most_concurrencies_the_export_advises_none_and_a_speculative_pool() -> None:
    table = {1: ("mtp", 2, 1.40, 1.30, 1.50), 2: ("none", 0), 4: ("none", 0), 8: ("none", 0)}
    profile = replace(factory.profile_data("mtp", 2, 1, table), study=replace(factory.profile_data().study, engine="vllm"))
    lines = comment_lines(serving.export_profile(profile, "vllm"))
    assert ("Speculation lost to none at 3 of 4 measured concurrency levels (2, 4, 8): consider serving without "
            "speculation (an export of method none) and") in lines
    assert ("routing low-load traffic to a separate speculative pool; speculation won at concurrency "
            "1 (mtp@2 1.40x [1.30, 1.50]).") in lines
    assert not any("Speculation lost" in line for line in comment_lines(
        serving.export_profile(kind_profile("mtp", "scheduled-then-off"), "vllm")))  # lost at 2 of 5 only


def test_the_report_per_engine() -> None:
    rows = (row("none", 0, 8, 800.0), row("mtp", 1, 8, 720.0, number=1, speedup=(0.9, 0.85, 0.95)))
    report = off_state_report(kind_profile("mtp", "constant-then-off", engine="trtllm", measurements=rows))
    assert set(report) == {"trtllm", "vllm"}
    assert report["trtllm"] == [{"engine": "trtllm", "concurrency": 8, "depth": 1, "measured": True,
                                 "configuration": "mtp@1", "unmeasured_because": None,
                                 "vs_none": {"value": 0.9, "low": 0.85, "high": 0.95, "n": 5, "confidence": 0.95},
                                 "summary": "draft length 1: mtp@1 0.90x [0.85, 0.95] vs none (n=5)"}]
    assert report["vllm"][0]["measured"] is False
    assert off_state_report(factory.profile_data("mtp", 3, 1, {1: ("mtp", 3), 4: ("mtp", 3)})) == {}  # never lost
