"""Replayed acceptance: chains counted from a run's steps, and the replay against stepping over the
match sequence itself."""

from __future__ import annotations

import itertools
import random

import pytest

from autotune.analysis.match_runs import ChainCounter, continuation, replayed_acceptance_lengths


def step_over(matches: list[int], depth: int) -> list[tuple[int, int]]:
    """A depth-``depth`` run over one request's match sequence: each step's (drafted, accepted);
    the target's token after the accepted drafts takes the next position, matched or not."""
    steps, at = [], 0
    while at < len(matches):
        accepted = 0
        while accepted < depth and at + accepted < len(matches) and matches[at + accepted]:
            accepted += 1
        steps.append((depth, accepted))
        at += accepted + 1
    return steps


def tokens_per_step(sequences: list[list[int]], depth: int) -> float:
    steps = [s for matches in sequences for s in step_over(matches, depth)]
    return sum(a + 1 for _, a in steps) / len(steps)


def counted(sequences: list[list[int]], depth: int) -> ChainCounter:
    counter = ChainCounter(depth)
    # Requests interleave in a batch: step them round-robin, as the decoder does.
    runs = [step_over(m, depth) for m in sequences]
    for i in range(max(len(r) for r in runs)):
        for request, run in enumerate(runs):
            if i < len(run):
                counter.step(request, *run[i])
    return counter


def unseen(matches: list[int], depth: int) -> list[int]:
    """The positions a depth-``depth`` run adds a target token at without a draft there (the
    request's last position, its end, is no draft position)."""
    positions, at = [], 0
    for _, accepted in step_over(matches, depth):
        if accepted == depth and at + accepted < len(matches) - 1:
            positions.append(at + accepted)
        at += accepted + 1
    return positions


def random_sequences(seed: int, n: int = 6, length: int = 60, p: float = 0.7) -> list[list[int]]:
    """Match sequences of requests, each ending with its end: a position no draft matches."""
    draws = random.Random(seed)
    return [[int(draws.random() < p) for _ in range(length - 1)] + [0] for _ in range(n)]


def test_without_censored_steps_the_replay_is_the_shallow_run_itself():
    # Runs of at most 3 matches: a depth-4 run sees every one of them end.
    draws = random.Random(3)
    sequences = [[int(draws.random() < 0.6 and i % 4 != 3) for i in range(80)] for _ in range(5)]
    counter = counted(sequences, 4)
    assert all(j == 0 for j, _ in counter.closed())
    replayed = replayed_acceptance_lengths(counter.closed(), 4, bonus=0.5)
    assert replayed == pytest.approx([tokens_per_step(sequences, k) for k in range(1, 5)])


@pytest.mark.parametrize("bonus", [0.0, 1.0])
def test_a_certain_guess_replays_the_sequence_with_the_unseen_positions_set_to_it(bonus):
    sequences = random_sequences(1)
    depth = 3
    counter = counted(sequences, depth)
    assert any(j > 0 for j, _ in counter.closed())  # censored steps: unseen positions to guess
    guessed = []
    for matches in sequences:
        filled = list(matches)
        for at in unseen(matches, depth):
            filled[at] = int(bonus)
        guessed.append(filled)
    replayed = replayed_acceptance_lengths(counter.closed(), depth, bonus)
    assert replayed == pytest.approx([tokens_per_step(guessed, k) for k in range(1, depth + 1)])


def test_an_uncertain_guess_is_the_expectation_over_every_filling():
    matches = [1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0]  # depth 2: unseen positions 2, 7 and 10
    depth, bonus = 2, 0.3
    counter = counted([matches], depth)
    holes = unseen(matches, depth)
    assert holes == [2, 7, 10]
    expected_steps = 0.0
    for filling in itertools.product((0, 1), repeat=len(holes)):
        filled = list(matches)
        for at, value in zip(holes, filling):
            filled[at] = value
        weight = 1.0
        for value in filling:
            weight *= bonus if value else 1 - bonus
        expected_steps += weight * len(step_over(filled, 1))
    replayed = replayed_acceptance_lengths(counter.closed(), depth, bonus)
    assert replayed[0] == pytest.approx(len(matches) / expected_steps)
    assert replayed[1] == pytest.approx(len(matches) / 5)  # its own five steps


def test_the_replay_at_the_runs_own_depth_is_its_acceptance_length():
    sequences = random_sequences(2, p=0.85)
    for depth in (1, 2, 5):
        counter = counted(sequences, depth)
        for bonus in (0.0, 0.4, 1.0):
            assert replayed_acceptance_lengths(counter.closed(), depth, bonus)[-1] == pytest.approx(
                tokens_per_step(sequences, depth))


def test_a_short_proposal_ends_the_run_of_matches():
    # An n-gram proposer drafted 2 of depth 4 and both matched: no draft for the next position.
    counter = ChainCounter(4)
    counter.step(0, 2, 2)
    counter.step(0, 4, 4)
    counter.step(0, 4, 1)
    counter.step(1, 4, 4)
    assert counter.closed() == {(0, 2): 1, (1, 1): 1, (0, 4): 1}


def test_continuation_is_the_last_positions_conditional_acceptance():
    assert continuation([80, 60, 30], 100) == pytest.approx(0.5)
    assert continuation([40], 100) == pytest.approx(0.4)
    assert continuation([0, 0], 100) == 0.0
    assert continuation([], 100) == 0.0


def test_no_steps_replay_nothing():
    assert replayed_acceptance_lengths({}, 3, 0.5) == []
