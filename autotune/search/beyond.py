"""Predictions past --max-depth, for the model-guided search (:mod:`autotune.search.guide`).

An answer at --max-depth says nothing about the depths beyond it, and a draft whose best depth is
the maximum may do better deeper. The step costs extrapolate already (linear past the deepest timed depth,
:func:`autotune.perfmodel.cost.interpolate`); the acceptance curves stop at the deepest depth
measured. :func:`extended_model` continues each curve geometrically, as the i.i.d. acceptance model
does: every further position keeps the last position's conditional acceptance ``a_D / a_{D-1}``
(``a_1`` for a curve of one position). An extrapolated position counts a quarter of the last
one's sequence-steps, so its binomial error, and with it the prediction's interval, is twice as
wide: the guide measures there only when even that prediction could win.
"""

from __future__ import annotations

import copy

from autotune.perfmodel.acceptance import AcceptanceCurve, PositionCounts
from autotune.perfmodel.model import PerformanceModel

# Sequence-steps an extrapolated position counts, as a share of the last measured position's.
EXTRAPOLATED_WEIGHT = 0.25


def extended_curve(curve: AcceptanceCurve, depth: int) -> AcceptanceCurve:
    """``curve`` continued to ``depth`` positions (see the module doc); unchanged when it already
    reaches ``depth`` or its last position was never reached."""
    positions = list(curve.positions)
    if len(positions) >= depth or not positions or positions[-1].steps == 0:
        return curve
    last = positions[-1]
    rates = [curve.rate(i) for i in range(1, len(positions) + 1)]
    ratio = rates[-1] / rates[-2] if len(rates) > 1 and rates[-2] > 0 else rates[0]
    ratio = min(ratio, 1.0)  # acceptance never grows with the position
    steps = max(1, round(last.steps * EXTRAPOLATED_WEIGHT))
    drafted_share = last.drafted / last.steps
    rate = rates[-1]
    while len(positions) < depth:
        rate *= ratio
        positions.append(PositionCounts(steps, round(rate * steps), round(drafted_share * steps)))
    return AcceptanceCurve(curve.proposer, tuple(positions), curve.sources)


def extended_model(model: PerformanceModel, depth: int) -> PerformanceModel:
    """A copy of ``model`` (its corrections and uncertainty kept) whose acceptance curves reach
    ``depth``; ``model`` itself is left as it was."""
    wide = copy.copy(model)
    wide.curves = {key: extended_curve(curve, depth) for key, curve in model.curves.items()}
    return wide
