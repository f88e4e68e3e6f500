"""A cost profile built from priced parts of a speculative step, whoever prices them.

A planned step is the sum of parts (DESIGN.md section 9)::

    none:   the target's pass over 1 token per row
    ngram:  the target verifying depth + 1 tokens per row (the lookup is host-side, ~0)
    mtp:    depth MTP-module passes of 1 token per row, then the target verifying depth + 1
    draft:  depth passes of the draft model (or EAGLE-3 head), then the target verifying depth + 1
    prefill: the rows' prompts through the target (and the draft model, or the MTP modules used)

A :class:`StepPricer` prices each part at a number of rows for one context length and prompt:
the roofline (:class:`autotune.perfmodel.roofline.RooflinePricer`) or measured kernel data
(:mod:`autotune.perfmodel.silicon_cost`). :func:`cost_profile` turns any pricer into the
:class:`~autotune.perfmodel.cost.CostProfile` the performance model replays, on the concurrency
grid of :func:`grid_concurrencies`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from autotune.errors import ConfigurationError
from autotune.perfmodel.cost import BASELINE, CostPoint, CostProfile

MAX_GRID_BATCH = 1 << 16


class StepPricer(Protocol):
    """Seconds of each part of a step at ``rows`` rows (module doc); context and prompt are the pricer's."""

    n_mtp: int  # MTP modules the target ships (deeper drafts reuse the last one)
    drafts: Iterable[str]  # the draft labels it prices

    def target_s(self, rows: int, tokens: int) -> float:
        """The target's pass over ``tokens`` new tokens per row (1: a plain decoding step)."""

    def mtp_token_s(self, rows: int) -> float:
        """One MTP module drafting one token per row."""

    def draft_token_s(self, label: str, rows: int) -> float:
        """One pass of draft ``label`` drafting one token per row."""

    def prefill_s(self, rows: int) -> float:
        """The rows' prompts through the target."""

    def mtp_prefill_s(self, rows: int, modules: int) -> float:
        """The rows' prompts through ``modules`` MTP modules."""

    def draft_prefill_s(self, label: str, rows: int) -> float:
        """The rows' prompts through draft ``label``."""


def grid_concurrencies(concurrencies: Iterable[int]) -> list[int]:
    """The concurrency levels the profile holds: those asked, plus 1 and the powers of two below the largest
    (a workload's tail runs at fewer rows, and the profile interpolates between its points)."""
    asked = sorted({int(b) for b in concurrencies})
    if not asked or asked[0] < 1 or asked[-1] > MAX_GRID_BATCH:
        raise ConfigurationError(f"concurrency levels must be between 1 and {MAX_GRID_BATCH}, got {asked}")
    grid, size = set(asked), 1
    while size < asked[-1]:
        grid.add(size)
        size *= 2
    return sorted(grid)


def cost_profile(pricer: StepPricer, concurrencies: Iterable[int], depths: Iterable[int], prompt_tokens: int,
                 methods: Iterable[str], source: str, spread: float) -> CostProfile:
    """A :class:`CostProfile` of the baseline and every one of ``methods`` at every depth and
    concurrency (module doc), ``source`` and ``spread`` (one sigma, relative) as the pricer's."""
    wanted = set(methods)
    depth_list = sorted({int(d) for d in depths})
    if depth_list and depth_list[0] < 1:
        raise ConfigurationError(f"depths must be >= 1, got {depth_list}")
    prompt = max(int(prompt_tokens), 1)
    points: list[CostPoint] = []
    for rows in grid_concurrencies(concurrencies):
        tokens = rows * prompt
        base_prefill = pricer.prefill_s(rows)
        points.append(CostPoint(BASELINE, None, 0, rows, 0.0, pricer.target_s(rows, 1), base_prefill, tokens))
        for depth in depth_list:
            verify = pricer.target_s(rows, depth + 1)
            if "ngram" in wanted:
                points.append(CostPoint("ngram", None, depth, rows, 0.0, verify, base_prefill, tokens, float(depth)))
            if "mtp" in wanted:
                modules = max(1, min(depth, pricer.n_mtp or depth))  # deeper drafts reuse the last module
                prefill = base_prefill + pricer.mtp_prefill_s(rows, modules)
                propose = depth * pricer.mtp_token_s(rows)
                points.append(CostPoint("mtp", None, depth, rows, propose, verify, prefill, tokens, float(depth)))
            if "draft" in wanted:
                for label in pricer.drafts:
                    propose = depth * pricer.draft_token_s(label, rows)
                    prefill = base_prefill + pricer.draft_prefill_s(label, rows)
                    points.append(CostPoint("draft", label, depth, rows, propose, verify, prefill, tokens, float(depth)))
    return CostProfile(points, source=source, spread=spread)
