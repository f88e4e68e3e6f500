"""A measured figure carried over to another mix of request categories (``--mix code=0.3,chat=0.7``).

The math. In steady state at concurrency C every decode step costs the same whatever the
categories of the rows it carries (the step's cost is the batch's, not the text's), and a row of
category c emits Ω_c tokens per step (its acceptance length, :mod:`autotune.analysis.categories`).
A request of category c with L_c tokens after its first then holds its slot for L_c / Ω_c steps.
With request shares w_c (Σ w_c = 1), the tokens per slot-step of the mix are

    Ω_mix = Σ_c w_c L_c / Σ_c (w_c L_c / Ω_c),

the token-weighted harmonic mean of the Ω_c, and token throughput is C / step x Ω_mix. The step
time is the measurement's, so a figure measured on the study's own mix carries over as

    tokens/s_mix = tokens/s_measured x Ω_mix / Ω_measured,    TPOT_mix = TPOT_measured x Ω_measured / Ω_mix,

with Ω_measured the same formula over the measurement's own shares (its requests per category),
which is its pooled Σ tokens / Σ steps. The speedup against none scales as tokens/s does (none emits
one token per step whatever the text). What it leaves out: prefill (a category with longer prompts
costs more to admit) and the step's dependence on context length; both are second order at the
output lengths a study runs, and the prediction carries the measurement's own interval plus the
categories' acceptance intervals, not theirs. L_c and w_c are the measured ones for the categories
named; a mix sets w_c only.

Parsing (:func:`parse_mix`) and checking (:func:`check_mix`) raise :class:`ConfigurationError` (one
line, exit 2 on the command line).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from autotune.analysis.intervals import Estimate
from autotune.errors import ConfigurationError

TOLERANCE = 1e-6
_ITEM = re.compile(r"\s*([a-z0-9][a-z0-9_-]{0,31})\s*=\s*([^,=\s]+)\s*")


def parse_mix(text: str) -> dict[str, float]:
    """``"code=0.3,chat=0.7"`` -> {"code": 0.3, "chat": 0.7}: request shares by category, >= 0,
    summing to 1 within 1e-6."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError("--mix needs category=share pairs, e.g. --mix code=0.3,chat=0.7")
    mix: dict[str, float] = {}
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            raise ConfigurationError(f"--mix: {item.strip()!r} is not category=share (e.g. code=0.3); "
                                     "categories are lower-case names")
        name, share_text = match.groups()
        try:
            share = float(share_text)
        except ValueError:
            raise ConfigurationError(f"--mix: the share of {name} must be a number, got {share_text!r}") from None
        if name in mix:
            raise ConfigurationError(f"--mix names {name} twice")
        mix[name] = share
    return check_shares(mix)


def check_shares(mix: Mapping[str, float]) -> dict[str, float]:
    """The shares as a dict; ConfigurationError unless each is a number >= 0 and they sum to 1
    within 1e-6."""
    if not isinstance(mix, Mapping) or not mix:
        raise ConfigurationError("a mix needs category=share pairs, e.g. code=0.3,chat=0.7")
    for name, share in mix.items():
        if not isinstance(share, (int, float)) or isinstance(share, bool) or not math.isfinite(share) or share < 0:
            raise ConfigurationError(f"--mix: the share of {name} must be a number >= 0, got {share!r}")
    total = sum(mix.values())
    if abs(total - 1) > TOLERANCE:
        raise ConfigurationError(f"--mix shares must sum to 1, they sum to {total:g}")
    return {str(name): float(share) for name, share in mix.items()}


def check_mix(mix: Mapping[str, float], by_category: Mapping[str, Any] | None, what: str = "the profile") -> None:
    """ConfigurationError unless every category of ``mix`` was measured in ``by_category``."""
    if not by_category:
        raise ConfigurationError(f"a mix needs acceptance per category, and {what} has none: tune on a workload "
                                 "whose requests carry a category (--workload prose|chat|FILE with \"category\")")
    missing = sorted(set(mix) - set(by_category))
    if missing:
        raise ConfigurationError(f"{what} measured no category {', '.join(missing)}; it measured "
                                 f"{', '.join(sorted(by_category))}")


def own_mix(by_category: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """The measurement's own request shares by category."""
    total = sum(entry["requests"] for entry in by_category.values())
    return {name: entry["requests"] / total for name, entry in by_category.items()}


def tokens_per_request(entry: Mapping[str, Any]) -> float:
    """L_c: a category's mean tokens after the first per request."""
    return entry["decode_tokens"] / entry["requests"] if entry["requests"] else 0.0


def mix_acceptance(by_category: Mapping[str, Mapping[str, Any]], mix: Mapping[str, float]) -> Estimate:
    """Ω_mix (module doc) with an approximate 95 % interval: the categories' interval half-widths
    propagated through the harmonic mean (delta method, combined in quadrature); None-wide where a
    weighted category has no interval."""
    weights = {name: mix.get(name, 0.0) * tokens_per_request(entry) for name, entry in by_category.items()}
    total = sum(weights.values())
    if total <= 0:
        return Estimate(1.0, None, None, 1)
    steps = sum(weight / by_category[name]["value"] for name, weight in weights.items() if weight > 0)
    omega = total / steps
    halves = []
    for name, weight in weights.items():
        entry = by_category[name]
        if weight <= 0:
            continue
        if entry.get("low") is None or entry.get("high") is None:
            return Estimate(omega, None, None, 1)
        # d Ω_mix / d Ω_c = Ω_mix² a_c / (A Ω_c²), a_c = w_c L_c, A = Σ a_c
        halves.append(omega ** 2 * weight / (total * entry["value"] ** 2) * (entry["high"] - entry["low"]) / 2)
    half = math.sqrt(sum(h * h for h in halves))
    n = min(int(by_category[name].get("n", 1)) for name, weight in weights.items() if weight > 0)
    return Estimate(omega, max(1.0, omega - half), omega + half, n)


@dataclass(frozen=True)
class MixFigures:
    """A configuration's figures carried over to ``mix`` (module doc): ``factor`` = Ω_mix / Ω_measured
    multiplies tokens/s and speedup and divides TPOT."""

    mix: dict[str, float]
    measured_mix: dict[str, float]
    acceptance_length: Estimate  # Ω_mix
    measured_acceptance_length: float  # Ω_measured
    factor: float
    figures: dict[str, Estimate | None] = field(default_factory=dict)  # name -> the mix's estimate

    def to_dict(self) -> dict[str, Any]:
        return {
            "mix": dict(self.mix), "measured_mix": dict(self.measured_mix),
            "acceptance_length": self.acceptance_length.to_dict(),
            "measured_acceptance_length": self.measured_acceptance_length, "factor": self.factor,
            "figures": {name: None if e is None else e.to_dict() for name, e in self.figures.items()},
            "predicted": True,
        }


# How each figure moves with the mix's acceptance: tokens/s and speedup with it, TPOT against it.
SCALING = {"tokens_per_s": 1, "speedup": 1, "tpot_ms_p50": -1}


def mix_factor(by_category: Mapping[str, Mapping[str, Any]], mix: Mapping[str, float]) -> tuple[Estimate, float, float]:
    """(Ω_mix, Ω_measured, Ω_mix / Ω_measured) for a measurement's ``by_category`` (checked)."""
    check_mix(mix, by_category)
    omega = mix_acceptance(by_category, mix)
    measured = mix_acceptance(by_category, own_mix(by_category)).value
    return omega, measured, omega.value / measured


def figures_for_mix(by_category: Mapping[str, Mapping[str, Any]], mix: Mapping[str, float],
                    figures: Mapping[str, Estimate | None]) -> MixFigures:
    """``figures`` (tokens_per_s, speedup, tpot_ms_p50: measured on the measurement's own mix) carried
    over to ``mix``; a figure's interval is scaled with it (the categories' acceptance intervals are
    in ``acceptance_length``)."""
    omega, measured, factor = mix_factor(by_category, mix)
    scaled = {name: None if estimate is None else estimate.scaled(factor ** SCALING.get(name, 1))
              for name, estimate in figures.items()}
    return MixFigures(dict(mix), own_mix(by_category), omega, measured, factor, scaled)
