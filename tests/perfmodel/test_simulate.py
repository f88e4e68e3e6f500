"""The replay of a workload's steady-state stream: continuous batching with expected step costs."""

from __future__ import annotations

import pytest

from autotune.analysis.steady import stream_length
from autotune.perfmodel.simulate import simulate


def test_one_request_takes_its_prefill_then_one_step_per_omega_tokens() -> None:
    run = simulate([10], [9], 1, 2.0, lambda rows: 0.01, lambda tokens: 0.1)
    # The stream at concurrency 1: the request 4 times, one after the other; 8 tokens after the
    # first, 2 per step: 4 steps each.
    assert len(run.requests) == stream_length(1, 1) == 4
    assert [r.send_s for r in run.requests] == pytest.approx([0.0, 0.14, 0.28, 0.42])
    assert [r.first_token_s for r in run.requests] == pytest.approx([0.1, 0.24, 0.38, 0.52])
    assert run.requests[-1].finish_s == pytest.approx(0.56)
    window = run.figures.window
    assert (window.start_s, window.end_s) == (pytest.approx(0.14), pytest.approx(0.56))
    # Inside the window, from the first finish: the three later requests' 9 tokens each.
    assert run.tokens_per_s == pytest.approx(3 * 9 / 0.42)
    assert run.figures.tpot_ms[0] == pytest.approx(40 / 8)
    assert run.figures.ttft_ms[0] == pytest.approx(100.0)


def test_a_partial_last_step_still_costs_a_step() -> None:
    run = simulate([4], [4], 1, 2.0, lambda rows: 1.0, lambda tokens: 0.0)
    assert run.requests[0].finish_s == pytest.approx(2.0)  # 3 tokens at 2 per step: 2 steps


def test_the_drain_is_outside_the_window_and_slots_refill() -> None:
    costs: list[int] = []

    def step(rows: int) -> float:
        costs.append(rows)
        return 1.0

    run = simulate([1, 1, 1], [3, 3, 5], 2, 1.0, step, lambda tokens: 0.0)
    # The stream: 9 requests (3 cycles of 3, at least 4 per slot). Nothing changes but at a finish,
    # so a stretch of steps at the same number of rows is priced once.
    assert len(run.requests) == 9
    assert costs[-1] == 1  # the last request runs alone: the drain
    window = run.figures.window
    assert window.steady and window.occupancy == pytest.approx(1.0)
    assert window.end_s == sorted(r.finish_s for r in run.requests)[9 - 2]  # the (N - C + 1)-th finish
    assert window.end_s < run.requests[-1].finish_s


def test_prefill_is_charged_on_the_padded_prompt_tokens() -> None:
    seen: list[int] = []
    simulate([3, 7], [1, 1], 2, 1.0, lambda rows: 0.0, lambda tokens: seen.append(tokens) or 0.0)
    assert seen == [14] * 4  # 2 rows x the longest prompt, each of the stream's 4 waves


def test_single_token_requests_finish_at_their_prefill() -> None:
    run = simulate([5], [1], 4, 1.0, lambda rows: 1.0, lambda tokens: 0.5)
    assert run.requests[0].finish_s == 0.5 and run.figures.tpot_ms == (None, None, None)


def test_omega_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        simulate([1], [2], 1, 0.5, lambda rows: 1.0, lambda tokens: 0.0)
