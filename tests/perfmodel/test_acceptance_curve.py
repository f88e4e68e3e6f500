"""Acceptance curves: counts by position, Omega and its error, pooling, and the derivation of
smaller depths from one run at the maximum depth checked against direct runs."""

from __future__ import annotations

import math

import pytest

from autotune.engines.base import EngineConfig
from autotune.perfmodel.acceptance import AcceptanceCurve, PositionCounts, proposer_key, run_counts
from autotune.workload import Request, Workload


def test_run_counts_turn_fractions_into_counts_with_the_drafted_denominators() -> None:
    counts = run_counts([0.8, 0.5], [100, 80], 100)
    assert counts == [PositionCounts(100, 80, 100), PositionCounts(100, 40, 80)]


def test_run_counts_without_drafted_counts_assume_every_step_drafted() -> None:
    assert run_counts([0.5], None, 10) == [PositionCounts(10, 5, 10)]


def test_positions_a_run_never_drafted_accepted_nothing() -> None:
    assert run_counts([0.5], [4], 10, depth=3)[1:] == [PositionCounts(10, 0, 0)] * 2


def test_omega_is_one_plus_the_accepted_shares_and_grows_with_depth() -> None:
    curve = AcceptanceCurve("mtp", (PositionCounts(100, 80, 100), PositionCounts(100, 60, 100), PositionCounts(100, 30, 100)))
    assert curve.omega(1) == pytest.approx(1.8)
    assert curve.omega(3) == pytest.approx(2.7)
    assert curve.omegas() == pytest.approx([1.8, 2.4, 2.7])
    # Standard error: the positions' binomial errors summed.
    expected = sum(math.sqrt(a * (1 - a) / 100) for a in (0.8, 0.6))
    assert curve.omega_se(2) == pytest.approx(expected)


def test_a_curve_refuses_depths_beyond_what_was_measured() -> None:
    curve = AcceptanceCurve("ngram", (PositionCounts(10, 5, 8),))
    assert curve.covers(1) and not curve.covers(2)
    with pytest.raises(ValueError, match="covers depths 1..1"):
        curve.omega(2)


def test_pooling_adds_counts_by_position_and_skips_a_run_already_pooled() -> None:
    curve = AcceptanceCurve.empty("mtp").pooled([PositionCounts(10, 8, 10)], source=1)
    curve = curve.pooled([PositionCounts(20, 10, 20), PositionCounts(20, 5, 20)], source=2)
    assert curve.positions == (PositionCounts(30, 18, 30), PositionCounts(20, 5, 20))
    assert curve.pooled([PositionCounts(99, 99, 99)], source=2) == curve
    assert AcceptanceCurve.from_positions("mtp", [p.to_dict() for p in curve.positions], curve.sources) == curve


def test_proposer_keys_name_the_draft_by_fingerprint() -> None:
    assert proposer_key("mtp") == "mtp"
    assert proposer_key("draft", "abc") == "draft:abc"
    with pytest.raises(ValueError):
        proposer_key("none")


@pytest.mark.parametrize("method", ["draft", "mtp"])
def test_one_run_at_the_maximum_depth_gives_the_acceptance_length_of_smaller_depths(method: str) -> None:
    """Greedy chain drafting: the first k drafts of a depth-4 step are a depth-k step's drafts, so
    Omega(k) from the depth-4 run must match a direct run at depth k (the step boundaries differ,
    so not exactly: within 5 %)."""
    from autotune.engines.embedded.engine import EmbeddedEngine

    workload = Workload("code", tuple(Request(p, 48) for p in (
        "def add(a, b):\n    return", "class Point:\n    def __init__(self, x, y):\n", "import os\nimport sys\n")))
    engine = EmbeddedEngine()
    draft = "builtin" if method == "draft" else None
    engine.load(EngineConfig(method, 4, draft))
    deep = engine.measure(workload, 3)
    curve = AcceptanceCurve(method, tuple(run_counts(deep.acceptance_by_position, deep.drafted_by_position,
                                                     deep.sequence_steps)))
    for depth in (1, 2):
        engine.load(EngineConfig(method, depth, draft))
        direct = engine.measure(workload, 3)
        assert curve.omega(depth) == pytest.approx(direct.acceptance_length, rel=0.05)


def test_a_replayed_run_gives_each_depth_its_tokens_over_its_replayed_steps() -> None:
    # A depth-2 run of 100 steps at 2.5 tokens per step, replayed at depth 1 to 1.6.
    counts = run_counts([0.9, 0.6], [100, 100], 100, depth=2, replayed=[1.6, 2.5])
    assert [(c.replay_tokens, c.replay_steps) for c in counts] == [(250.0, pytest.approx(156.25)), (250.0, 100.0)]
    curve = AcceptanceCurve("ngram", tuple(counts))
    assert curve.omega(1) == pytest.approx(1.6)  # replayed, where the positions would say 1.9
    assert curve.omega(2) == pytest.approx(2.5)  # the run's own depth: its own acceptance length
    # A depth-1 run of 50 steps at 1.4 pools with it: (250 + 70) tokens over (156.25 + 50) steps.
    pooled = curve.pooled(run_counts([0.4], [50], 50, depth=1, replayed=[1.4]), source=7)
    assert pooled.omega(1) == pytest.approx(320 / 206.25)
    assert pooled.omega(2) == pytest.approx(2.5)
    assert AcceptanceCurve.from_positions("ngram", [p.to_dict() for p in pooled.positions], pooled.sources) == pooled
    # Counts stored before replays existed read as never replayed.
    assert PositionCounts.from_dict({"steps": 10, "accepted": 5}) == PositionCounts(10, 5, 10)
    assert "replay_steps" not in PositionCounts(10, 5, 10).to_dict()


@pytest.mark.slow
def test_the_ngram_curve_of_a_deep_run_replays_the_shallow_runs_of_the_engine() -> None:
    """On the shipped prose workload an n-gram run at depth 6 gives depths 1-3 their acceptance
    length: replayed within 5 % of the run at that depth, where reading by position is further off."""
    from autotune.engines.embedded.engine import EmbeddedEngine
    from autotune.workload import load_workload

    workload = load_workload("prose").with_max_tokens(48)
    engine = EmbeddedEngine()
    engine.load(EngineConfig("ngram", 6))
    deep = engine.measure(workload, 1)
    assert len(deep.replayed_acceptance_length) == 6
    assert deep.replayed_acceptance_length[-1] == pytest.approx(deep.acceptance_length)
    args = (deep.acceptance_by_position, deep.drafted_by_position, deep.sequence_steps, 6)
    replayed = AcceptanceCurve("ngram", tuple(run_counts(*args, replayed=deep.replayed_acceptance_length)))
    positional = AcceptanceCurve("ngram", tuple(run_counts(*args)))
    for depth in (1, 2, 3):
        engine.load(EngineConfig("ngram", depth))
        direct = engine.measure(workload, 1).acceptance_length
        assert replayed.omega(depth) == pytest.approx(direct, rel=0.05)
        assert abs(replayed.omega(depth) - direct) < abs(positional.omega(depth) - direct)
