"""Objectives and SLOs: values in Optuna's order, constraints as relative excess."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from autotune.errors import ConfigurationError
from autotune.search.objective import Objective, Slo


def figures(**values) -> SimpleNamespace:
    base = dict(tokens_per_s=100.0, tpot_ms_p50=10.0, tpot_ms_p90=12.0, tpot_ms_p99=20.0,
                ttft_ms_p50=50.0, ttft_ms_p90=80.0, ttft_ms_p99=90.0)
    return SimpleNamespace(**{**base, **values})


def test_throughput_maximises_tokens_per_second() -> None:
    objective = Objective("throughput")
    assert objective.directions == ["maximize"]
    assert objective.values(figures()) == [100.0]
    assert objective.constraints(figures()) == {}


def test_pareto_trades_throughput_against_tpot() -> None:
    objective = Objective("pareto")
    assert objective.directions == ["maximize", "minimize"]
    assert objective.values(figures()) == [100.0, 10.0]
    with pytest.raises(ValueError, match="no TPOT"):
        objective.values(figures(tpot_ms_p50=None))


def test_slo_constraints_are_relative_excess_at_the_chosen_percentile() -> None:
    slo = Slo(tpot_ms=10.0, ttft_ms=100.0, percentile=90)
    assert slo.limits == {"tpot_ms_p90": 10.0, "ttft_ms_p90": 100.0}
    assert slo.excess(figures()) == pytest.approx({"tpot_ms_p90": 0.2, "ttft_ms_p90": -0.2})
    assert not slo.is_met(figures())
    assert slo.violation(figures()) == pytest.approx(0.2)
    assert Slo(tpot_ms=25.0, percentile=99).is_met(figures())
    assert Slo(tpot_ms=5.0, percentile=50).violation(figures()) == pytest.approx(1.0)


def test_a_latency_that_was_not_measured_counts_as_met() -> None:
    assert Slo(tpot_ms=1.0).is_met(figures(tpot_ms_p90=None))


def test_slo_round_trips() -> None:
    slo = Slo(tpot_ms=12.5, percentile=99)
    assert Slo.from_dict(slo.to_dict()) == slo


@pytest.mark.parametrize(
    ("objective", "message"),
    [
        (Objective("latency"), "unknown objective"),
        (Objective(slo=Slo(tpot_ms=0)), "tpot_ms must be a number"),
        (Objective(slo=Slo(ttft_ms=float("nan"))), "ttft_ms must be a number"),
        (Objective(slo=Slo(tpot_ms=5, percentile=95)), "percentile must be one of 50, 90, 99"),
    ],
)
def test_invalid_objectives_are_refused(objective, message) -> None:
    with pytest.raises(ConfigurationError, match=message):
        objective.validate()
