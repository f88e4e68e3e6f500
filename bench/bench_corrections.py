"""The correction rules on synthetic studies: the former rule (one residual moves each level halfway,
in-sample sigma) against perfmodel.model's (2+ residuals, James-Stein shrinkage, leave-one-out sigma).

A study is 14 screening points in a default study's order (4 baselines, one maximum-depth run per
proposer, then drafts and MTP); a point's true log value is its method's bias, a pass adds N(0,
noise) and, with probability ``p_out``, the issue's +41 % outlier. Each speculative point is predicted
from the passes before it; printed: median |pred / true - 1| and how often the 95 % interval from
sigma_model holds the pass. Figures in docs/statistics.md::

    python bench/bench_corrections.py [studies]
"""

from __future__ import annotations

import math
import random
import statistics
import sys
from collections import defaultdict

from autotune.perfmodel.model import PRIOR_SIGMA, PRIOR_WEIGHT_SIGMA, ConfigKey, corrections, loo_errors

ORDER = ([("none", None)] * 4 + [("draft", "d"), ("mtp", None), ("ngram", None)]
         + [("draft", "d")] * 4 + [("mtp", None)] * 2 + [("ngram", None)])
OUTLIER = math.log(1.41)
SCENARIOS = {
    "raw model unbiased": dict(noise=0.12),
    "the same, first pass +41 % (issue 21)": dict(noise=0.12, first_outlier=True),
    "the same, 10 % of passes +41 %": dict(noise=0.12, p_out=0.10),
    "raw 15 % low for every method": dict(noise=0.12, shift=math.log(1 / 0.87)),
    "raw 20 % high for drafts only": dict(noise=0.12, draft=math.log(1 / 1.2)),
}


def former(logs: list[tuple[ConfigKey, float]]) -> tuple[float, dict[ConfigKey, float], list[float]]:
    """The rule before issue 21: each level's sum over (n + 1), residuals in-sample."""
    shift = sum(r for _, r in logs) / (len(logs) + 1)
    by_group: dict[ConfigKey, list[float]] = defaultdict(list)
    for key, r in logs:
        by_group[key].append(r - shift)
    groups = {key: sum(values) / (len(values) + 1) for key, values in by_group.items()}
    return shift, groups, [r - shift - groups[key] for key, r in logs]


def current(logs: list[tuple[ConfigKey, float]]) -> tuple[float, dict[ConfigKey, float], list[float]]:
    """The current rule; these synthetic studies have no concurrency levels, so its cell level stays out."""
    triples = [(key, None, r) for key, r in logs]
    shift, groups, _ = corrections(triples)
    return shift, groups, loo_errors(triples)


def evaluate(scenario: dict, rule, studies: int) -> tuple[float, float]:  # noqa: ANN001
    errors, held = [], []
    for seed in range(studies):
        rng = random.Random(seed)
        logs: list[tuple[ConfigKey, float]] = []
        for i, key in enumerate(ORDER):
            true = scenario.get("shift", 0.0) + scenario.get(key[0], 0.0)
            outlier = (i == 0 and scenario.get("first_outlier")) or rng.random() < scenario.get("p_out", 0.0)
            measured = true + rng.gauss(0, scenario["noise"]) + (OUTLIER if outlier else 0.0)
            if logs and key[0] != "none":
                shift, groups, residuals = rule(logs)
                sigma = math.sqrt((PRIOR_WEIGHT_SIGMA * PRIOR_SIGMA ** 2 + sum(e * e for e in residuals))
                                  / (PRIOR_WEIGHT_SIGMA + len(residuals)))
                predicted = shift + groups.get(key, 0.0)
                errors.append(abs(math.expm1(predicted - true)))
                held.append(abs(predicted - measured) <= 1.959964 * sigma)
            logs.append((key, measured))
    return statistics.median(errors), sum(held) / len(held)


def main(studies: int) -> None:
    for name, scenario in SCENARIOS.items():
        (old, old_held), (new, new_held) = evaluate(scenario, former, studies), evaluate(scenario, current, studies)
        print(f"{name:<40} old {old:6.1%}  new {new:6.1%}   interval holds the pass: old {old_held:4.0%}  new {new_held:4.0%}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
