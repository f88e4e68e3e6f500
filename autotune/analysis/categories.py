"""Acceptance per kind of request: a run's acceptance length split by the requests' ``category``.

A workload whose requests carry a category (``code``, ``prose``, ``chat``, ...: :mod:`autotune.workload`)
gets, with each measurement, one entry per category (``Measurement.acceptance_by_category``)::

    {"value": 2.41, "low": 2.18, "high": 2.64, "n": 6, "confidence": 0.95,
     "requests": 12, "decode_tokens": 1130, "decode_steps": 469}

* ``value``: the category's acceptance length, pooled over its requests of the run: tokens after the
  first / decode steps (``decode_tokens / decode_steps``). A request's decode steps are the distinct
  moments its tokens arrived after the first one: every engine delivers the tokens of one decode
  step together (one timestamp in the embedded engine, one streamed chunk from vLLM and
  TensorRT-LLM; :class:`autotune.analysis.steady.RequestResult`). This is the definition of the
  vLLM and TensorRT-LLM engines' ``acceptance_length`` (tokens after the first / sequence-steps), on
  the tokens delivered; the embedded engine's whole-run figure counts a last step's tokens before
  the cut at ``max_tokens`` or EOS as well, so it can read slightly higher.
* ``low`` / ``high``: the 95 % interval of that ratio, a **ratio estimator** over the category's
  distinct prompts: with y_j, x_j the decode tokens and steps of prompt j (summed over the copies the
  steady-state stream runs of it) and R = Σy / Σx, the standard error is
  sqrt(Σ (y_j - R x_j)² / (m (m - 1))) / x̄ over m prompts, times Student's t on m - 1 degrees of
  freedom. A ratio estimator, not the t-interval of per-request means, because the figure is the
  pooled ratio (long requests weigh by their steps, as they do in the run's throughput), and
  clustered by prompt because the stream's copies of a greedy prompt decode identically: they are
  one observation, not several, and counting them apart would narrow the interval for nothing.
  The interval says how much the category's acceptance depends on which of its prompts were drawn;
  with one prompt there is none (None). ``low`` is floored at 1 (a pass yields at least one token).
* ``n``: the category's distinct prompts; ``requests``: its requests in the run (copies included);
  ``decode_tokens`` / ``decode_steps``: the sums the ratio is taken of. ``decode_tokens / requests``
  is the category's mean output length after the first token (the L_c of :mod:`autotune.analysis.mix`).

A workload without categories gets None (nothing stored, nothing shown). Requests without a
category in a workload that has some are counted under :data:`UNCATEGORIZED`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from autotune.analysis.intervals import CONFIDENCE, Estimate, t_quantile

UNCATEGORIZED = "uncategorized"


def decode_steps(token_times_s: Sequence[float]) -> int:
    """A request's decode steps: the distinct arrival times of its tokens after the first one (the
    first token comes from prefill; a decode step's tokens arrive together)."""
    # Tokens after the first that share its time came in the prefill's chunk (a streaming engine
    # can deliver the first decode step with it): that is still a step of their own.
    return len(set(token_times_s[1:]))


def acceptance_by_category(
    categories: Sequence[str | None],
    prompts: Sequence[Hashable],
    tokens: Sequence[int],
    token_times_s: Sequence[Sequence[float]],
    confidence: float = CONFIDENCE,
) -> dict[str, dict[str, Any]] | None:
    """Per category, the acceptance length of a run's requests (module doc): request i has category
    ``categories[i]``, comes from prompt ``prompts[i]`` (copies share it), generated ``tokens[i]``
    tokens arriving at ``token_times_s[i]``. None when no request has a category."""
    if not any(c is not None for c in categories):
        return None
    if not len(categories) == len(prompts) == len(tokens) == len(token_times_s):
        raise ValueError("one category, prompt, token count and token times per request")
    clusters: dict[str, dict[Hashable, list[int]]] = {}  # category -> prompt -> [tokens, steps]
    counts: dict[str, int] = {}
    for category, prompt, n_tokens, times in zip(categories, prompts, tokens, token_times_s):
        name = category if category is not None else UNCATEGORIZED
        cluster = clusters.setdefault(name, {}).setdefault(prompt, [0, 0])
        cluster[0] += max(0, n_tokens - 1)
        cluster[1] += decode_steps(times)
        counts[name] = counts.get(name, 0) + 1
    return {name: {**ratio_estimate(list(by_prompt.values()), confidence).to_dict(), "requests": counts[name],
                   "decode_tokens": sum(y for y, _ in by_prompt.values()),
                   "decode_steps": sum(x for _, x in by_prompt.values())}
            for name, by_prompt in sorted(clusters.items())}


def ratio_estimate(pairs: Sequence[Sequence[int | float]], confidence: float = CONFIDENCE) -> Estimate:
    """Σy / Σx over ``pairs`` (y, x) with the ratio estimator's t-interval (module doc); 1.0 with no
    interval when nothing was decoded (no steps), no interval for one pair."""
    total_y = sum(float(y) for y, _ in pairs)
    total_x = sum(float(x) for _, x in pairs)
    m = len(pairs)
    if total_x <= 0:
        return Estimate(1.0, None, None, m, confidence)
    ratio = total_y / total_x
    if m < 2:
        return Estimate(ratio, None, None, m, confidence)
    mean_x = total_x / m
    residuals = sum((float(y) - ratio * float(x)) ** 2 for y, x in pairs)
    half = t_quantile(m - 1, confidence) * math.sqrt(residuals / (m * (m - 1))) / mean_x
    return Estimate(ratio, max(1.0, ratio - half), ratio + half, m, confidence)


def category_differences(by_category: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per pair of categories whose acceptance intervals do not overlap (they differ by
    more than the noise over their prompts), largest ratio first; [] otherwise."""
    lines = []
    names = sorted(by_category)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            high, low = sorted((by_category[a], by_category[b]), key=lambda e: -e["value"])
            if None in (high.get("low"), low.get("high")) or high["low"] <= low["high"]:
                continue
            top, bottom = (a, b) if high is by_category[a] else (b, a)
            ratio = high["value"] / low["value"]
            lines.append((ratio, f"acceptance differs by category beyond the noise: {top} {high['value']:.3g} "
                                 f"[{high['low']:.3g}, {high['high']:.3g}] against {bottom} {low['value']:.3g} "
                                 f"[{low['low']:.3g}, {low['high']:.3g}] tokens per pass ({ratio:.2f}x); "
                                 "a different mix of requests moves the figures (--mix)"))
    return [line for _, line in sorted(lines, key=lambda item: -item[0])]
