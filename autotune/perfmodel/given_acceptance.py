"""Acceptance a user gives instead of a measured profile (``autotune plan --acceptance ...``).

Two forms, both turned into an :class:`~autotune.perfmodel.acceptance.AcceptanceCurve`:

* per position, ``a1,a2,...``: a_i = P(a step accepts >= i drafts), the unconditional rates the
  curves hold, so they lie in [0, 1] and do not rise with position (accepting i + 1 drafts means
  accepting i first);
* an acceptance length L (tokens per target pass, the bonus token included) at depth D: without the
  rates, each draft is taken to be accepted with the same conditional probability r given the one
  before it, so a_i = r^i and L = 1 + r + r^2 + ... + r^D, solved for r by bisection.

A given curve carries no sampling error: its counts stand for :data:`GIVEN_STEPS` sequence-steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from autotune.errors import ConfigurationError
from autotune.perfmodel.acceptance import AcceptanceCurve, PositionCounts

GIVEN_STEPS = 10 ** 9
MIN_LENGTH_DEPTH = 3  # the depth an acceptance length is read at, unless it says (L@D)


def parse_rates(text: str) -> list[float]:
    """``"0.8,0.6,0.4"`` -> the checked per-position rates (module doc); ConfigurationError otherwise."""
    try:
        rates = [float(part) for part in text.split(",")]
    except ValueError:
        raise ConfigurationError(f"--acceptance must be comma-separated rates by draft position, got {text!r}") from None
    check_rates(rates)
    return rates


def check_rates(rates: Sequence[float]) -> None:
    """Rates by position in [0, 1] that do not rise with position (module doc)."""
    if not rates or any(not 0.0 <= rate <= 1.0 or math.isnan(rate) for rate in rates):
        raise ConfigurationError(f"acceptance rates by position must lie in [0, 1], got {list(rates)}")
    rising = [i + 2 for i in range(len(rates) - 1) if rates[i + 1] > rates[i]]
    if rising:
        raise ConfigurationError(f"acceptance rates by position are unconditional (P(accept >= i drafts)) and cannot "
                                 f"rise with position, but position {rising[0]} is above position {rising[0] - 1}: "
                                 f"{list(rates)}")


def parse_length(text: str) -> tuple[float, int]:
    """``"3.2"`` or ``"3.2@4"`` -> (acceptance length, depth it was measured at); the depth defaults to
    the larger of :data:`MIN_LENGTH_DEPTH` and ceil(L)."""
    value, _, depth_text = text.partition("@")
    try:
        length = float(value)
        depth = int(depth_text) if depth_text else max(MIN_LENGTH_DEPTH, math.ceil(length))
    except ValueError:
        raise ConfigurationError(f"--acceptance-length must be a number, or number@depth, got {text!r}") from None
    if not 1.0 <= length < depth + 1 or depth < 1:
        raise ConfigurationError(f"an acceptance length counts the bonus token: it lies in [1, depth + 1), got {length} "
                                 f"at depth {depth}")
    return length, depth


def rates_from_length(length: float, depth: int) -> list[float]:
    """Geometric rates a_i = r^i with 1 + sum_{i<=depth} r^i = ``length`` (module doc)."""
    low, high = 0.0, 1.0
    for _ in range(60):  # bisection: the sum rises with r
        mid = (low + high) / 2
        if 1 + sum(mid ** i for i in range(1, depth + 1)) < length:
            low = mid
        else:
            high = mid
    r = (low + high) / 2
    return [r ** i for i in range(1, depth + 1)]


def given_curve(proposer: str, rates: Sequence[float]) -> AcceptanceCurve:
    """The curve of the checked ``rates`` (module doc)."""
    check_rates(rates)
    return AcceptanceCurve(proposer, tuple(PositionCounts(GIVEN_STEPS, round(rate * GIVEN_STEPS), GIVEN_STEPS)
                                           for rate in rates))
