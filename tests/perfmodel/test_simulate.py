"""The workload replay: continuous batching with expected step costs."""

from __future__ import annotations

import pytest

from autotune.perfmodel.simulate import simulate


def test_one_request_takes_its_prefill_then_one_step_per_omega_tokens() -> None:
    run = simulate([10], [9], 1, 2.0, lambda rows: 0.01, lambda tokens: 0.1)
    # 8 tokens after the first, 2 per step: 4 steps.
    assert run.wall_s == pytest.approx(0.1 + 4 * 0.01)
    assert run.first_token_s == [pytest.approx(0.1)]
    assert run.tpot_ms() == [pytest.approx(40 / 8)]
    assert run.tokens_per_s == pytest.approx(9 / 0.14)


def test_a_partial_last_step_still_costs_a_step() -> None:
    run = simulate([4], [4], 1, 2.0, lambda rows: 1.0, lambda tokens: 0.0)
    assert run.wall_s == pytest.approx(2.0)  # 3 tokens at 2 per step: 2 steps


def test_the_tail_runs_at_the_smaller_batch_cost_and_slots_refill() -> None:
    costs: list[int] = []

    def step(rows: int) -> float:
        costs.append(rows)
        return 1.0

    run = simulate([1, 1, 1], [3, 3, 5], 2, 1.0, step, lambda tokens: 0.0)
    # Requests 0 and 1 run together for 2 steps; then 2 is admitted and runs 4 steps alone.
    assert costs == [2, 2, 1, 1, 1, 1]
    assert run.finish_s == [2.0, 2.0, 6.0]
    assert run.output_tokens == 11


def test_prefill_is_charged_on_the_padded_prompt_tokens() -> None:
    seen: list[int] = []
    simulate([3, 7], [1, 1], 2, 1.0, lambda rows: 0.0, lambda tokens: seen.append(tokens) or 0.0)
    assert seen == [14]  # 2 rows x the longest prompt


def test_single_token_requests_finish_at_their_prefill() -> None:
    run = simulate([5], [1], 4, 1.0, lambda rows: 1.0, lambda tokens: 0.5)
    assert run.finish_s == [0.5] and run.tpot_ms() == []


def test_omega_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        simulate([1], [2], 1, 0.5, lambda rows: 1.0, lambda tokens: 0.0)
