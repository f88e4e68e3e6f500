"""Prompt-lookup proposals."""

import pytest

from autotune.engines.embedded.ngram import NgramProposer


def lookup(sequence: list[int], depth: int = 3, max_ngram: int = 3) -> list[int]:
    return NgramProposer(depth, batch_size=1, max_ngram=max_ngram).lookup(0, sequence)


def test_proposes_what_followed_the_most_recent_earlier_occurrence():
    #          0  1  2  3  4  5  6  7  8  9
    sequence = [1, 2, 3, 7, 1, 2, 3, 8, 9, 1, 2, 3]
    assert lookup(sequence) == [8, 9, 1]


def test_prefers_the_longest_matching_ngram():
    # Suffix [5, 2, 3]: the 3-gram occurs once (followed by 6); the 2-gram [2, 3] more recently (followed by 9).
    sequence = [5, 2, 3, 6, 0, 2, 3, 9, 5, 2, 3]
    assert lookup(sequence) == [6, 0, 2]
    assert lookup(sequence, max_ngram=2) == [9, 5, 2]


def test_falls_back_to_shorter_ngrams_and_to_nothing():
    assert lookup([4, 1, 5, 9, 2, 6, 1]) == [5, 9, 2]  # only the 1-gram [1] matches
    assert lookup([1, 2, 3, 4]) == []


def test_proposal_is_cut_at_depth_and_at_the_end_of_the_text():
    assert lookup([1, 2, 3, 4, 5, 6, 1, 2], depth=2) == [3, 4]
    assert lookup([7, 7], depth=5) == [7]  # the continuation runs into the suffix itself


def test_index_updates_incrementally_as_tokens_are_committed():
    proposer = NgramProposer(depth=2, batch_size=1)
    sequence = [1, 2, 3, 1]
    assert proposer.lookup(0, sequence) == [2, 3]
    sequence += [4, 1]  # the latest earlier [1] is now at position 3, followed by [4, 1]
    assert proposer.lookup(0, sequence) == [4, 1]
    assert proposer.lookup(0, sequence + [9]) == []  # unseen token: no match


def test_rejects_a_non_positive_ngram_size():
    with pytest.raises(ValueError, match="max_ngram"):
        NgramProposer(depth=2, batch_size=1, max_ngram=0)
