"""The decode loop: losslessness of every method, cache consistency, continuous batching, counters."""

from __future__ import annotations

import pytest
import torch

from autotune.engines.embedded.decoding import Decoder, GenerationRequest, Speculation, decode, required_capacity
from autotune.engines.embedded.network import CausalLM
from autotune.engines.embedded.mtp import MtpProposer
from autotune.engines.embedded.proposers import DraftModelProposer

NEAR_TIE = 1e-4  # logit margin below which fp32 rounding may legitimately flip a greedy choice
DEPTHS = range(1, 9)
# Every method covers every depth 1..8 and every batch size 1..8: depth d runs at batch_size[d - 1].
BATCH_FOR_DEPTH = {"draft": [1, 2, 3, 4, 5, 6, 7, 8], "mtp": [8, 7, 6, 5, 4, 3, 2, 1], "ngram": [5, 8, 2, 7, 1, 4, 6, 3]}


@pytest.fixture(scope="module")
def requests(prompts) -> list[GenerationRequest]:
    """Greedy requests with varied lengths (1 and 2 tokens included: finishing at prefill / first step)."""
    max_tokens = [24, 1, 31, 2, 17, 40, 9, 28, 36, 13]
    return [GenerationRequest(prompt, n) for prompt, n in zip(prompts, max_tokens)]


@pytest.fixture(scope="module")
def baseline(tiny_target, requests) -> list[list[int]]:
    """Greedy autoregressive outputs, one request at a time."""
    return [r.tokens for r in decode(tiny_target, requests, batch_size=1).results]


def greedy_margin(target: CausalLM, prompt: list[int], prefix: list[int], a: int, b: int) -> float:
    with torch.no_grad():
        logits, _ = target(torch.tensor([prompt + prefix]))
    return float(logits[0, -1, a] - logits[0, -1, b])


def assert_same_greedy_outputs(target, requests, expected: list[list[int]], got: list[list[int]]) -> None:
    """Outputs must be identical, except after a divergence at a float near-tie (reported)."""
    for index, (want, have) in enumerate(zip(expected, got)):
        assert len(have) == len(want), f"request {index}: {len(have)} tokens, expected {len(want)}"
        for position, (a, b) in enumerate(zip(want, have)):
            if a != b:
                margin = greedy_margin(target, requests[index].prompt, want[:position], a, b)
                assert abs(margin) < NEAR_TIE, (
                    f"request {index} diverges at token {position}: expected {a}, got {b}, logit margin {margin:.3g}"
                )
                break  # after a legitimate near-tie flip the continuations may differ


# -- greedy losslessness ----------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", range(2, 9))
def test_batched_baseline_matches_batch_one(tiny_target, requests, baseline, batch_size):
    result = decode(tiny_target, requests, batch_size=batch_size)
    assert_same_greedy_outputs(tiny_target, requests, baseline, [r.tokens for r in result.results])


@pytest.mark.parametrize(
    ("method", "depth", "batch_size"),
    [(method, depth, batches[depth - 1]) for method, batches in BATCH_FOR_DEPTH.items() for depth in DEPTHS],
)
def test_greedy_speculation_reproduces_the_baseline(tiny_target, tiny_draft, requests, baseline, method, depth, batch_size):
    result = decode(tiny_target, requests, Speculation(method, depth, tiny_draft), batch_size)
    assert_same_greedy_outputs(tiny_target, requests, baseline, [r.tokens for r in result.results])
    stats = result.stats
    if method != "ngram":  # model proposers always draft `depth` tokens
        assert stats.drafted_tokens == depth * stats.sequence_steps
    assert 0 < stats.accepted_tokens <= stats.drafted_tokens


@pytest.mark.parametrize("method", ["draft", "mtp", "ngram"])
def test_tiny_models_exercise_acceptance_and_rejection(tiny_target, tiny_draft, requests, method):
    """The matrix above is only meaningful if drafts are both accepted and rejected."""
    stats = decode(tiny_target, requests, Speculation(method, 8, tiny_draft), batch_size=4).stats
    assert 0 < stats.accepted_tokens < stats.drafted_tokens


def test_draft_identical_to_target_is_always_accepted_when_greedy(tiny_target, requests, baseline):
    result = decode(tiny_target, requests, Speculation("draft", 4, tiny_target), batch_size=3)
    assert result.stats.accepted_tokens == result.stats.drafted_tokens > 0
    assert_same_greedy_outputs(tiny_target, requests, baseline, [r.tokens for r in result.results])


def test_draft_identical_to_target_is_accepted_when_sampling(tiny_target, prompts):
    requests = [GenerationRequest(p, 30, temperature=1.0) for p in prompts]
    stats = decode(tiny_target, requests, Speculation("draft", 4, tiny_target), batch_size=4, seed=3).stats
    assert stats.accepted_tokens >= 0.99 * stats.drafted_tokens


# -- proposer caches agree with recomputation from scratch -------------------------------------------


def reference_mtp_logits(target: CausalLM, committed: list[int], drafts: list[int]) -> torch.Tensor:
    """Logits behind each MTP draft, recomputed without caches (drafts teacher-forced): module k
    over positions 0..L-1, then the last module reused with its own hidden at the next positions."""
    L = len(committed) - 1
    K = min(len(drafts), target.config.n_mtp)
    extended = committed + drafts
    out = []
    with torch.no_grad():
        _, hidden = target(torch.tensor([committed[:L]]))  # (1, L, C)
        for k in range(K):
            module_input = hidden
            logits, hidden = target.mtp_forward(k, hidden, torch.tensor([extended[k + 1 : k + 1 + L]]))
            out.append(logits[0, -1])
        for step in range(len(drafts) - K):
            module_input = torch.cat([module_input, hidden[:, -1:]], dim=1)
            logits, hidden = target.mtp_forward(K - 1, module_input, torch.tensor([extended[K : L + K + step + 1]]))
            out.append(logits[0, -1])
    return torch.stack(out)  # (G, V)


def reference_draft_model_logits(draft: CausalLM, committed: list[int], drafts: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits, _ = draft(torch.tensor([committed + drafts[:-1]]))
    return logits[0, len(committed) - 1 :]  # (G, V)


@pytest.mark.parametrize(("method", "depth"), [("mtp", 1), ("mtp", 2), ("mtp", 5), ("draft", 1), ("draft", 4)])
def test_cached_draft_distributions_equal_a_recomputation_from_scratch(tiny_target, tiny_draft, prompts, method, depth):
    """At every step and for every row, the distributions q the drafts were sampled from equal an
    uncached recomputation: caches are rolled back and refilled correctly whatever was accepted."""
    checked = []
    model, proposer_class, reference = (
        (tiny_target, MtpProposer, reference_mtp_logits) if method == "mtp" else (tiny_draft, DraftModelProposer, reference_draft_model_logits)
    )

    class Checked(proposer_class):
        def propose(self, state, rows):
            proposal = super().propose(state, rows)
            for row, slot in enumerate(rows.slots):
                committed = list(state.sequences[slot])
                expected = torch.softmax(reference(model, committed, proposal.tokens[row].tolist()), dim=-1)
                checked.append((len(committed), expected, proposal.probs[row]))
            return proposal

    requests = [GenerationRequest(p, 12 + 4 * i, temperature=1.0) for i, p in enumerate(prompts[:6])]
    batch_size, capacity = 3, required_capacity(requests, depth)
    proposer = Checked(model, depth, batch_size, capacity)
    result = Decoder(tiny_target, proposer, batch_size, capacity, eos_id=None, seed=5).run(requests)

    assert 0 < result.stats.accepted_tokens < result.stats.drafted_tokens  # rollbacks of all sizes happen
    assert len(checked) > 30
    for n_committed, expected, got in checked:
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4, msg=f"drafts after {n_committed} tokens")


# -- continuous batching, stopping, counters --------------------------------------------------------


def test_a_finished_request_frees_its_slot_for_the_next_while_others_continue(tiny_target, prompts):
    requests = [GenerationRequest(prompts[0], 3), GenerationRequest(prompts[1], 40), GenerationRequest(prompts[2], 3)]
    result = decode(tiny_target, requests, Speculation("mtp", 2), batch_size=2)
    short, long_, queued = result.results
    assert [len(r.tokens) for r in result.results] == [3, 40, 3]
    # The queued request started (and finished) while the long one was still decoding.
    assert short.finish_s <= queued.first_token_s < queued.finish_s < long_.finish_s


def test_generation_stops_at_eos_including_it(tiny_target, tiny_draft, requests, baseline):
    index = 5  # a 40-token request
    eos = baseline[index][10]
    cut = baseline[index].index(eos) + 1
    for method, depth in [("none", 0), ("draft", 4), ("mtp", 3), ("ngram", 5)]:
        result = decode(tiny_target, [requests[index]], Speculation(method, depth, tiny_draft), eos_id=eos)
        assert result.results[0].tokens == baseline[index][:cut], method


def test_counters_are_consistent(tiny_target, tiny_draft, requests):
    result = decode(tiny_target, requests, Speculation("draft", 3, tiny_draft), batch_size=4)
    stats = result.stats
    produced = sum(len(r.tokens) for r in result.results)
    # Each sequence-step yields accepted + 1 tokens, prefill one each; truncation can only cut.
    assert produced <= len(requests) + stats.accepted_tokens + stats.sequence_steps
    assert stats.drafted_by_position == [stats.sequence_steps] * 3
    assert sum(stats.accepted_by_position) == stats.accepted_tokens
    assert stats.rejections == stats.sequence_steps - stats.accepted_by_position[-1]  # steps not fully accepted
    # A draft position is only accepted if all earlier ones were.
    assert stats.accepted_by_position == sorted(stats.accepted_by_position, reverse=True)
    assert stats.target_passes < stats.sequence_steps  # several rows share a pass
    # The runs of matches, request by request, cover every sequence-step and every token it made.
    chains = stats.chains.closed()
    assert sum((censored + 1) * n for (censored, _), n in chains.items()) == stats.sequence_steps
    assert sum((censored * 4 + accepted + 1) * n for (censored, accepted), n in chains.items()) == (
        stats.accepted_tokens + stats.sequence_steps)
    assert result.state_bytes > 0


def test_ngram_steps_without_a_match_draft_nothing(tiny_target):
    # A prompt of distinct tokens: the first step finds no earlier occurrence of its last token.
    request = GenerationRequest(list(range(40, 60)), 1 + 1)
    stats = decode(tiny_target, [request], Speculation("ngram", 4)).stats
    assert (stats.sequence_steps, stats.drafted_tokens) == (1, 0)


@pytest.mark.parametrize(("prompt", "max_tokens", "temperature"), [([], 4, 0.0), ([1], 0, 0.0), ([1], 4, -1.0)])
def test_invalid_generation_requests_are_rejected(prompt, max_tokens, temperature):
    with pytest.raises(ValueError, match="request needs"):
        GenerationRequest(prompt, max_tokens, temperature)
