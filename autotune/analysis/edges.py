"""Answers on the edge of the searched space: a best depth at the deepest depth tried, or a best
concurrency at the largest one tried. The optimum may lie beyond, and the study cannot tell; the
tune summary, ``autotune trials`` and the HTML report say so, with the rerun that would look.

Pure functions over a study's rows and its search space (``max_depth``, ``concurrencies``);
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
    """One answer on the edge: ``kind`` is ``depth`` or ``concurrency``; ``config`` (method, draft,
    depth) and ``concurrency`` name the row it concerns; ``message`` says it in a sentence."""

    kind: str
    config: tuple[str, str | None, int]
    concurrency: int
    message: str

    def concerns(self, row: Any) -> bool:
        """Whether ``row`` measured the configuration this edge is about."""
        return (row.method, row.draft, row.depth, row.concurrency) == (*self.config, self.concurrency)

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
        label = verdict.best_label.rsplit(" c", 1)[0]
        bound = "--max-depth" if deepest == max_depth else "the deepest depth measured"
        rerun = (f"rerun with --max-depth {min(deepest + DEPTH_STEP, depth_limit)}" if deepest < depth_limit
                 else f"{depth_limit} is the deepest autotune measures")
        edges.append(Edge("depth", (verdict.method, verdict.draft, verdict.best_depth), verdict.best_concurrency,
                          f"{label} sits at {bound} {deepest}: deeper may be faster; {rerun}."))
    return edges


def concurrency_edge(rows: Sequence[Any], concurrencies: Sequence[int], slo: Any = NO_SLO) -> Edge | None:
    """The recommendation at the largest concurrency tried, when more than one was tried."""
    choice = choose_profile(rows, slo)
    if choice is None or len(concurrencies) < 2 or choice.row.concurrency != max(concurrencies):
        return None
    row = choice.row
    largest = max(concurrencies)
    return Edge("concurrency", (row.method, row.draft, row.depth), row.concurrency,
                f"The recommended concurrency, {largest}, is the largest tried: a larger one may be faster if it fits; "
                f"rerun with --concurrency {','.join(map(str, sorted(concurrencies)))},{2 * largest}.")


def study_edges(rows: Sequence[Any], max_depth: int, concurrencies: Sequence[int], depth_limit: int,
                slo: Any = NO_SLO) -> list[Edge]:
    """Every edge of the study's answer: the methods' best depths, then the recommended concurrency."""
    edge = concurrency_edge(rows, concurrencies, slo)
    return depth_edges(rows, max_depth, depth_limit) + ([edge] if edge else [])


def space_edges(rows: Sequence[Any], search_space: dict[str, Any], depth_limit: int, slo: Any = NO_SLO) -> list[Edge]:
    """:func:`study_edges` for a study's stored search space (``max_depth``, ``concurrencies``); none
    when the record lacks them."""
    if not search_space.get("max_depth") or not search_space.get("concurrencies"):
        return []
    return study_edges(rows, int(search_space["max_depth"]), list(search_space["concurrencies"]), depth_limit, slo)


def row_edges(edges: Sequence[Edge], row: Any) -> list[str]:
    """The messages of ``edges`` that concern ``row``."""
    return [edge.message for edge in edges if edge.concerns(row)]

