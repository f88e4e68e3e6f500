"""Answers on the edge of the searched space: a best depth at the deepest depth tried, or a best
batch size at the largest one tried. The optimum may lie beyond, and the study cannot tell; the
tune summary, ``autotune trials`` and the HTML report say so, with the rerun that would look.

Pure functions over a study's rows and its search space (``max_depth``, ``batch_sizes``);
``depth_limit`` is the deepest depth the engines accept (``autotune.engines.base.MAX_DEPTH``: this
package imports nothing above it), so a rerun is never advised past it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from autotune.analysis.decision import (
    BASELINE,
    NO_SLO,
    choose_profile,
    method_name,
    method_verdicts,
)

# How much deeper a rerun should look (the model sampler also predicts this far beyond --max-depth).
DEPTH_STEP = 2


@dataclass(frozen=True)
class Edge:
    """One answer on the edge: ``kind`` is ``depth`` or ``batch_size``; ``config`` (method, draft,
    depth) and ``batch_size`` name the row it concerns; ``message`` says it in a sentence."""

    kind: str
    config: tuple[str, str | None, int]
    batch_size: int
    message: str

    def concerns(self, row: Any) -> bool:
        """Whether ``row`` measured the configuration this edge is about."""
        return (row.method, row.draft, row.depth, row.batch_size) == (*self.config, self.batch_size)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def depth_edges(rows: Sequence[Any], max_depth: int, depth_limit: int) -> list[Edge]:
    """Each method whose best configuration sits at the deepest depth measured for it, when that is
    --max-depth or deeper (the model sampler may have measured beyond it)."""
    names = list(dict.fromkeys(method_name(row) for row in rows if row.method != BASELINE))
    edges = []
    for verdict in method_verdicts(rows, names):
        if verdict.best_depth is None:
            continue
        deepest = max([max_depth, *(row.depth for row in rows if method_name(row) == verdict.name)])
        if verdict.best_depth < deepest:
            continue
        label = verdict.best_label.rsplit(" b", 1)[0]
        bound = "--max-depth" if deepest == max_depth else "the deepest depth measured"
        rerun = (f"rerun with --max-depth {min(deepest + DEPTH_STEP, depth_limit)}" if deepest < depth_limit
                 else f"{depth_limit} is the deepest autotune measures")
        edges.append(Edge("depth", (verdict.method, verdict.draft, verdict.best_depth), verdict.best_batch_size,
                          f"{label} sits at {bound} {deepest}: deeper may be faster; {rerun}."))
    return edges


def batch_size_edge(rows: Sequence[Any], batch_sizes: Sequence[int], slo: Any = NO_SLO) -> Edge | None:
    """The recommendation at the largest batch size tried, when more than one was tried."""
    choice = choose_profile(rows, slo)
    if choice is None or len(batch_sizes) < 2 or choice.row.batch_size != max(batch_sizes):
        return None
    row = choice.row
    largest = max(batch_sizes)
    return Edge("batch_size", (row.method, row.draft, row.depth), row.batch_size,
                f"The recommended batch size, {largest}, is the largest tried: a larger one may be faster if it fits; "
                f"rerun with --batch-sizes {','.join(map(str, sorted(batch_sizes)))},{2 * largest}.")


def study_edges(rows: Sequence[Any], max_depth: int, batch_sizes: Sequence[int], depth_limit: int,
                slo: Any = NO_SLO) -> list[Edge]:
    """Every edge of the study's answer: the methods' best depths, then the recommended batch size."""
    batch = batch_size_edge(rows, batch_sizes, slo)
    return depth_edges(rows, max_depth, depth_limit) + ([batch] if batch else [])


def space_edges(rows: Sequence[Any], search_space: dict[str, Any], depth_limit: int, slo: Any = NO_SLO) -> list[Edge]:
    """:func:`study_edges` for a study's stored search space (``max_depth``, ``batch_sizes``); none
    when the record lacks them."""
    if not search_space.get("max_depth") or not search_space.get("batch_sizes"):
        return []
    return study_edges(rows, int(search_space["max_depth"]), list(search_space["batch_sizes"]), depth_limit, slo)


def row_edges(edges: Sequence[Edge], row: Any) -> list[str]:
    """The messages of ``edges`` that concern ``row``."""
    return [edge.message for edge in edges if edge.concerns(row)]

