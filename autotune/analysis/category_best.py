"""Whether the best configuration differs between request categories by more than the noise.

A study measures its workload's mix; each measured configuration also stored its acceptance per
category (:mod:`autotune.analysis.categories`). Its tokens/s on category c alone is the mix formula
with w_c = 1 (:mod:`autotune.analysis.mix`): tokens/s x Ω_c / Ω_measured. Its interval combines, in
quadrature of relative half-widths, the figure's own (a confirmed row's; a screening pass has none)
and Ω_c's (over the category's prompts). At the recommended concurrency, when the fastest
configuration on one category beats, on that category, the configuration that is fastest on
another by more than both intervals, the summary says so; where the best is the same everywhere but
the recommended configuration's acceptance differs by category beyond the intervals, it says that
instead (:func:`autotune.analysis.categories.category_differences`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from autotune.analysis.categories import category_differences
from autotune.analysis.decision import config_label, deciding_rows
from autotune.analysis.intervals import Estimate
from autotune.analysis.mix import mix_acceptance, own_mix


def categories_of(row: Any) -> dict[str, dict[str, Any]] | None:
    """A stored row's acceptance per category (None without)."""
    stored = ((getattr(row, "extra", None) or {}).get("measurement") or {}).get("acceptance_by_category")
    return dict(stored) if stored else None


def on_category(row: Any, category: str) -> Estimate | None:
    """The row's tokens/s on ``category`` alone, with its interval (module doc); None when the row
    did not measure that category."""
    by_category = categories_of(row)
    if not by_category or category not in by_category or row.tokens_per_s is None:
        return None
    entry = by_category[category]
    factor = entry["value"] / mix_acceptance(by_category, own_mix(by_category)).value
    figure = row.estimate("tokens_per_s") if hasattr(row, "estimate") else Estimate(row.tokens_per_s)
    widths = [w for w in (figure.relative_half_width,
                          None if entry.get("low") is None else (entry["high"] - entry["low"]) / 2 / entry["value"])]
    value = figure.value * factor
    if any(w is None for w in widths):
        return Estimate(value, None, None, figure.n)
    half = math.sqrt(sum(w * w for w in widths)) * value
    return Estimate(value, value - half, value + half, figure.n)


def best_on_categories(rows: Iterable[Any], concurrency: int) -> dict[str, tuple[Any, Estimate]]:
    """The fastest deciding row on each category alone at ``concurrency``, with its figure there."""
    deciding = [row for row in deciding_rows(rows) if row.concurrency == concurrency and categories_of(row)]
    best: dict[str, tuple[Any, Estimate]] = {}
    for name in sorted({name for row in deciding for name in categories_of(row)}):
        figures = [(row, estimate) for row in deciding if (estimate := on_category(row, name)) is not None]
        if figures:
            best[name] = max(figures, key=lambda item: item[1].value)
    return best


def category_lines(rows: Iterable[Any], concurrency: int, recommended: Any = None) -> list[str]:
    """The summary's lines on categories at ``concurrency`` (module doc); [] for a workload without
    categories or where nothing differs beyond the noise."""
    best = best_on_categories(rows, concurrency)
    lines = []
    for name, (winner, figure) in best.items():
        for other, (rival, _) in best.items():
            if other == name or config_label(rival) == config_label(winner):
                continue
            against = on_category(rival, name)
            if against is None or not (figure.has_interval and against.has_interval) or figure.low <= against.high:
                continue
            lines.append(f"The best configuration differs by category at concurrency {concurrency}: on {name} "
                         f"{config_label(winner)} ({figure.value:,.0f} tokens/s [{figure.low:,.0f}, {figure.high:,.0f}]) "
                         f"beats {config_label(rival)}, the best on {other}, by {figure.value / against.value - 1:.0%} "
                         f"beyond the noise ({against.value:,.0f} [{against.low:,.0f}, {against.high:,.0f}]); "
                         "`autotune profiles show ID --mix` gives the figures for another mix of requests.")
    if not lines and recommended is not None and (own := categories_of(recommended)):
        lines = [f"{config_label(recommended)} c{concurrency}: {line}" for line in category_differences(own)]
    return lines
