"""Verification math: greedy prefix acceptance and exact rejection sampling."""

import pytest
import torch

from autotune.engines.embedded.acceptance import token_probabilities, verify_greedy, verify_sampling

V = 5
N_SAMPLES = 200_000


def chi_square_p_value(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson's goodness-of-fit p-value of ``counts`` against ``probs`` (cells expecting < 5 pooled)."""
    counts, probs = counts.double().flatten(), probs.double().flatten()
    expected = probs * counts.sum()
    small = expected < 5
    observed = torch.cat([counts[~small], counts[small].sum()[None]])
    expected = torch.cat([expected[~small], expected[small].sum()[None]])
    keep = expected > 0
    if bool((observed[~keep] > 0).any()):
        return 0.0  # a token the target gives probability 0
    observed, expected = observed[keep], expected[keep]
    statistic = ((observed - expected) ** 2 / expected).sum()
    dof = len(observed) - 1
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64), statistic / 2))


def test_greedy_accepts_the_matching_prefix_then_appends_the_target_argmax():
    # Target argmax per position: [3, 1, 4, 0]; drafts match the first two of three.
    target_tokens = torch.tensor([[3, 1, 4, 0]])
    logits = torch.nn.functional.one_hot(target_tokens, V).float()
    n_accepted, next_token = verify_greedy(torch.tensor([[3, 1, 2]]), torch.tensor([3]), logits)
    assert n_accepted.tolist() == [2]
    assert next_token.tolist() == [4]


def test_greedy_all_accepted_takes_the_bonus_and_padding_is_never_accepted():
    target_tokens = torch.tensor([[3, 1, 4, 0], [2, 2, 2, 2]])
    logits = torch.nn.functional.one_hot(target_tokens, V).float()
    # Row 1 has one real draft; its padding equals the target's choice but must not count.
    drafts = torch.tensor([[3, 1, 4], [2, 2, 2]])
    n_accepted, next_token = verify_greedy(drafts, torch.tensor([3, 1]), logits)
    assert n_accepted.tolist() == [3, 1]
    assert next_token.tolist() == [0, 2]


def test_greedy_without_drafts_is_a_plain_decode_step():
    logits = torch.randn(3, 1, V)
    n_accepted, next_token = verify_greedy(torch.zeros(3, 0, dtype=torch.long), torch.zeros(3, dtype=torch.long), logits)
    assert n_accepted.tolist() == [0, 0, 0]
    assert next_token.tolist() == logits[:, 0].argmax(-1).tolist()


def test_token_probabilities_is_softmax_at_temperature_and_one_hot_when_greedy():
    logits = torch.randn(2, 3, V)
    probs = token_probabilities(logits, torch.tensor([0.5, 0.0]))
    torch.testing.assert_close(probs[0], torch.softmax(logits[0] / 0.5, -1))
    torch.testing.assert_close(probs[1], torch.nn.functional.one_hot(logits[1].argmax(-1), V).float())


def _first_token_of_output(drafts, n_accepted, next_token):
    """The first token the step emits: the first draft if accepted, else the replacement."""
    return torch.where(n_accepted > 0, drafts[:, 0], next_token)


@pytest.mark.parametrize("deterministic_proposer", [False, True], ids=["draft-q", "one-hot-q"])
def test_rejection_sampling_emits_tokens_distributed_as_the_target(deterministic_proposer):
    """Leviathan et al.: whatever q proposes, the emitted token ~ p (checked on the first two tokens)."""
    gen = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(3, V, generator=gen) * 2, -1)  # target at positions 0, 1, 2
    q = torch.softmax(torch.randn(2, V, generator=gen) * 2, -1)  # draft at positions 0, 1
    if deterministic_proposer:
        drafts = torch.tensor([[1, 3]]).expand(N_SAMPLES, 2)  # an n-gram proposes the same tokens every time
        draft_probs = None
    else:
        drafts = torch.stack([torch.multinomial(q[j], N_SAMPLES, replacement=True, generator=gen) for j in range(2)], 1)
        draft_probs = q.expand(N_SAMPLES, 2, V)
    # Position 1's target distribution must not depend on the first token for the marginal check
    # of the second token to be exact: use the same p rows for every prefix.
    target_probs = p.expand(N_SAMPLES, 3, V)
    n_accepted, next_token = verify_sampling(drafts, torch.full((N_SAMPLES,), 2), draft_probs, target_probs, gen)

    first = _first_token_of_output(drafts, n_accepted, next_token)
    assert chi_square_p_value(torch.bincount(first, minlength=V), p[0]) > 1e-3
    # Second token, among samples that emitted at least two: drafts[1] if accepted, else the replacement.
    has_second = n_accepted >= 1
    second = torch.where(n_accepted[has_second] >= 2, drafts[has_second, 1], next_token[has_second])
    assert chi_square_p_value(torch.bincount(second, minlength=V), p[1]) > 1e-3
    # Acceptance of the first draft happens with probability sum_x min(p, q) (1 - TV(p, q)).
    q0 = torch.nn.functional.one_hot(torch.tensor(1), V).float() if deterministic_proposer else q[0]
    expected_acceptance = float(torch.minimum(p[0], q0).sum())
    assert abs(float((n_accepted > 0).float().mean()) - expected_acceptance) < 0.005


def test_rejection_sampling_accepts_everything_when_draft_equals_target():
    gen = torch.Generator().manual_seed(1)
    p = torch.softmax(torch.randn(1000, 4, V, generator=gen), -1)
    drafts = torch.stack([torch.multinomial(p[:, j], 1, generator=gen).squeeze(1) for j in range(3)], 1)
    n_accepted, _ = verify_sampling(drafts, torch.full((1000,), 3), p[:, :3], p, gen)
    assert n_accepted.tolist() == [3] * 1000


def test_rejection_sampling_with_one_hot_distributions_is_greedy():
    """Greedy rows inside a sampled batch: p and q one-hot reproduce greedy verification."""
    gen = torch.Generator().manual_seed(2)
    logits = torch.randn(64, 4, V, generator=gen)
    drafts = torch.randint(0, V, (64, 3), generator=gen)
    drafts[:32] = logits[:32, :3].argmax(-1)  # half the rows draft exactly the target's choices
    counts = torch.randint(0, 4, (64,), generator=gen)
    greedy = torch.zeros(64)
    p = token_probabilities(logits, greedy)
    q = torch.nn.functional.one_hot(drafts, V).float()
    assert [t.tolist() for t in verify_sampling(drafts, counts, q, p, gen)] == [
        t.tolist() for t in verify_greedy(drafts, counts, logits)
    ]
