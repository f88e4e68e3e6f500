"""End to end: speculative sampling generates sequences distributed exactly as the target's.

A 4-token vocabulary makes the exact joint distribution of three generated tokens computable
(64 outcomes); thousands of requests through the real decode loop (continuous batching, caches,
rollbacks) are compared with it by a chi-square test at a fixed seed.
"""

from __future__ import annotations

import pytest
import torch

from autotune.engines.embedded import decoding
from autotune.engines.embedded.acceptance import sample, verify_sampling
from autotune.engines.embedded.decoding import DecodeResult, GenerationRequest, Speculation, decode
from autotune.engines.embedded.network import CausalLM, ModelConfig

V = 4
N_TOKENS = 3
N_REQUESTS = 3000
PROMPT = [0, 1, 2, 0, 1, 2, 0, 1]  # repetitive, so the n-gram proposer finds matches
CONFIG = ModelConfig(vocab_size=V, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=32, n_mtp=1)


def peaked_random_model(seed: int, n_mtp: int) -> CausalLM:
    """Random weights with a scaled-up head: distinct, peaked distributions (random init alone is near uniform)."""
    torch.manual_seed(seed)
    model = CausalLM(ModelConfig(**{**CONFIG.to_dict(), "n_mtp": n_mtp})).eval()
    with torch.no_grad():
        model.head.weight.mul_(60)
    return model


@pytest.fixture(scope="module")
def target() -> CausalLM:
    return peaked_random_model(10, n_mtp=1)


@pytest.fixture(scope="module")
def exact_joint(target) -> torch.Tensor:
    """P(t1, t2, t3 | PROMPT) at temperature 1, flattened to (64,)."""
    joint = torch.ones(1)
    prefixes: list[list[int]] = [[]]
    with torch.no_grad():
        for _ in range(N_TOKENS):
            logits, _ = target(torch.tensor([PROMPT + p for p in prefixes]))
            probs = torch.softmax(logits[:, -1].double(), -1)  # (len(prefixes), V)
            joint = (joint[:, None] * probs).flatten()
            prefixes = [p + [t] for p in prefixes for t in range(V)]
    return joint


def chi_square_p_value(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson goodness-of-fit p-value (cells expecting < 5 pooled into one)."""
    counts, probs = counts.double(), probs.double()
    expected = probs * counts.sum()
    small = expected < 5
    observed = torch.cat([counts[~small], counts[small].sum()[None]])
    expected = torch.cat([expected[~small], expected[small].sum()[None]])
    statistic = ((observed - expected) ** 2 / expected.clamp_min(1e-12)).sum()
    return float(torch.special.gammaincc(torch.tensor((len(observed) - 1) / 2, dtype=torch.float64), statistic / 2))


def outcome_counts(result: DecodeResult) -> torch.Tensor:
    """How often each of the 64 possible 3-token outputs occurred."""
    outcomes = torch.tensor([r.tokens for r in result.results])  # (N, 3)
    assert outcomes.shape == (N_REQUESTS, N_TOKENS)
    return torch.bincount((outcomes * torch.tensor([V * V, V, 1])).sum(1), minlength=V**N_TOKENS)


@pytest.mark.parametrize(
    ("method", "depth"),
    [("none", 0), ("draft", 2), ("mtp", 3), ("ngram", 2)],  # mtp 3 > n_mtp = 1: the reused module drafts too
)
def test_sampled_sequences_follow_the_target_distribution(target, exact_joint, method, depth):
    draft = peaked_random_model(11, n_mtp=0)  # disagrees with the target often: rejections are frequent
    requests = [GenerationRequest(PROMPT, N_TOKENS, temperature=1.0)] * N_REQUESTS
    result = decode(target, requests, Speculation(method, depth, draft), batch_size=48, seed=1234)
    assert chi_square_p_value(outcome_counts(result), exact_joint) > 1e-3
    if method != "none":
        assert 0 < result.stats.accepted_tokens < result.stats.drafted_tokens


def test_the_check_detects_a_classic_bug(target, exact_joint, monkeypatch):
    """Guard on the guard: resampling from p (instead of norm(max(0, p - q))) after a rejection
    skews the output towards the draft's choices, and the test above would catch it."""

    def resample_from_p(drafts, n_drafts, draft_probs, target_probs, generator):
        n_accepted, _ = verify_sampling(drafts, n_drafts, draft_probs, target_probs, generator)
        p_next = target_probs.gather(1, n_accepted[:, None, None].expand(-1, 1, V)).squeeze(1)
        return n_accepted, sample(p_next, generator)

    monkeypatch.setattr(decoding, "verify_sampling", resample_from_p)
    draft = peaked_random_model(11, n_mtp=0)
    requests = [GenerationRequest(PROMPT, N_TOKENS, temperature=1.0)] * N_REQUESTS
    result = decoding.decode(target, requests, Speculation("draft", 2, draft), batch_size=48, seed=1234)
    assert chi_square_p_value(outcome_counts(result), exact_joint) < 1e-3
