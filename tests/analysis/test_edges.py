"""Answers on the edge of the searched space (autotune.analysis.edges): pure functions over rows."""

from __future__ import annotations

from autotune.analysis.edges import concurrency_edge, depth_edges, row_edges, space_edges, study_edges
from autotune.store.results import TrialRow

LIMIT = 16


def row(method: str, depth: int, concurrency: int, tokens_per_s: float, number: int = 0) -> TrialRow:
    return TrialRow(trial_number=number, method=method, draft="builtin" if method == "draft" else None, depth=depth,
                    concurrency=concurrency, state="complete", tokens_per_s=tokens_per_s, phase="screening")


def study(*points: tuple[str, int, int, float]) -> list[TrialRow]:
    return [row(*point, number=i) for i, point in enumerate(points)]


def test_a_best_depth_at_max_depth_is_an_edge_with_the_rerun_that_would_look() -> None:
    rows = study(("none", 0, 8, 100.0), ("draft", 7, 8, 150.0), ("draft", 8, 8, 170.0), ("mtp", 3, 8, 160.0),
                 ("mtp", 8, 8, 120.0))
    (edge,) = depth_edges(rows, 8, LIMIT)
    assert edge.kind == "depth" and edge.config == ("draft", "builtin", 8) and edge.concurrency == 8
    assert edge.message == "draft@8 sits at --max-depth 8: deeper may be faster; rerun with --max-depth 10."
    assert row_edges([edge], rows[2]) == [edge.message] and row_edges([edge], rows[1]) == []


def test_a_depth_measured_beyond_max_depth_moves_the_edge() -> None:
    """The model sampler measured draft@10 beyond --max-depth 8: the edge is there now."""
    inside = study(("none", 0, 4, 100.0), ("draft", 8, 4, 170.0), ("draft", 10, 4, 160.0))
    assert depth_edges(inside, 8, LIMIT) == []  # draft@8 is inside: 10 was looked at and lost
    beyond = study(("none", 0, 4, 100.0), ("draft", 8, 4, 170.0), ("draft", 10, 4, 180.0))
    (edge,) = depth_edges(beyond, 8, LIMIT)
    assert edge.message == ("draft@10 sits at the deepest depth measured 10: deeper may be faster; "
                            "rerun with --max-depth 12.")


def test_the_deepest_depth_the_engines_take_is_never_advised_past() -> None:
    (edge,) = depth_edges(study(("none", 0, 1, 100.0), ("mtp", 16, 1, 150.0)), 16, LIMIT)
    assert edge.message.endswith("deeper may be faster; 16 is the deepest autotune measures.")
    (edge,) = depth_edges(study(("none", 0, 1, 100.0), ("mtp", 15, 1, 150.0)), 15, LIMIT)
    assert edge.message.endswith("rerun with --max-depth 16.")


def test_the_recommendation_at_the_largest_concurrency_is_an_edge() -> None:
    rows = study(("none", 0, 1, 100.0), ("none", 0, 4, 300.0), ("mtp", 2, 4, 420.0), ("mtp", 2, 1, 150.0))
    edge = concurrency_edge(rows, [1, 4])
    assert edge.kind == "concurrency" and edge.config == ("mtp", None, 2) and edge.concurrency == 4
    assert edge.message == ("The recommended concurrency, 4, is the largest tried: a larger one may be faster if it "
                            "fits; rerun with --concurrency 1,4,8.")
    assert concurrency_edge(rows, [4]) is None  # a single concurrency was asked for: no range to be on the edge of
    smaller = study(("none", 0, 1, 100.0), ("none", 0, 4, 50.0))
    assert concurrency_edge(smaller, [1, 4]) is None


def test_an_answer_inside_the_space_has_no_edge_and_a_space_without_bounds_none() -> None:
    rows = study(("none", 0, 1, 100.0), ("none", 0, 2, 180.0), ("draft", 3, 1, 150.0), ("draft", 8, 1, 120.0),
                 ("none", 0, 4, 170.0))
    assert study_edges(rows, 8, [1, 2, 4], LIMIT) == []
    assert space_edges(rows, {}, LIMIT) == []
    edged = rows[:3]  # draft@3 at --max-depth 3, the recommendation (none c2) at the largest of 1, 2
    assert [e.kind for e in space_edges(edged, {"max_depth": 3, "concurrencies": [1, 2]}, LIMIT)] == ["depth", "concurrency"]
