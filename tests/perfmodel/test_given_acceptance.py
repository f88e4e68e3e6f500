"""Acceptance given on the command line: per-position rates checked, a length turned into
geometric rates that give it back."""

from __future__ import annotations

import pytest

from autotune.errors import ConfigurationError
from autotune.perfmodel.given_acceptance import given_curve, parse_length, parse_rates, rates_from_length


def test_rates_by_position_make_a_curve_without_sampling_error() -> None:
    curve = given_curve("mtp", parse_rates("0.8,0.6,0.45"))
    assert curve.omega(3) == pytest.approx(2.85) and curve.omega_se(3) < 1e-4


@pytest.mark.parametrize(("text", "fragment"), [("0.8,1.2", "[0, 1]"), ("-0.1", "[0, 1]"), ("0.5,0.7", "rise"),
                                                ("0.8,x", "comma-separated")])
def test_bad_rates_are_refused(text: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        parse_rates(text)


def test_a_length_becomes_geometric_rates_that_give_it_back() -> None:
    length, depth = parse_length("3.2")
    assert depth == 4  # max(3, ceil(3.2))
    rates = rates_from_length(length, depth)
    assert 1 + sum(rates) == pytest.approx(3.2, abs=1e-9)
    assert rates[1] / rates[0] == pytest.approx(rates[0])  # a_i = r^i
    assert parse_length("1.83@4") == (1.83, 4)
    for bad in ("5@3", "0.5", "x", "2@0"):
        with pytest.raises(ConfigurationError, match="acceptance"):
            parse_length(bad)
