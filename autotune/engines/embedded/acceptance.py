"""Verification of draft tokens against the target: which drafts survive, and the next token.

Greedy (temperature 0): draft token j is accepted while it equals the target's argmax at j; the
target's argmax after the accepted prefix is appended (the correction, or a bonus token when every
draft was accepted). Output equals greedy target decoding token for token.

Sampling (Leviathan et al. 2023, arXiv 2211.17192): draft x_j ~ q_j is accepted with probability
min(1, p_j(x_j) / q_j(x_j)); at the first rejection the next token is drawn from
norm(max(0, p_j - q_j)); when all drafts are accepted a bonus token is drawn from p. The output is
distributed exactly as sampling from p. A deterministic proposer (n-gram) is the special case
q_j = one_hot(x_j): accept with probability p_j(x_j), otherwise draw from p_j with x_j removed.

Rows of a batch carry different numbers of drafts: ``drafts`` (R, G) is right-padded and
``n_drafts`` (R,) says how many of each row's columns are real.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def token_probabilities(logits: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
    """softmax(logits / T) per row; a row with T == 0 gets the one-hot of its argmax (greedy).

    logits (R, T, V), temperatures (R,) -> probabilities (R, T, V) in float32.
    """
    logits = logits.float()
    greedy = temperatures == 0  # (R,)
    scaled = logits / torch.where(greedy, 1.0, temperatures)[:, None, None]
    probs = torch.softmax(scaled, dim=-1)
    if bool(greedy.any()):
        one_hot = F.one_hot(logits.argmax(-1), logits.shape[-1]).to(probs.dtype)
        probs = torch.where(greedy[:, None, None], one_hot, probs)
    return probs


def sample(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row from probs (R, V) -> (R,) long."""
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


def _accepted_prefix(accepted: torch.Tensor, n_drafts: torch.Tensor) -> torch.Tensor:
    """Length of the all-accepted prefix per row: accepted (R, G) bool -> (R,) long."""
    real = torch.arange(accepted.shape[1], device=accepted.device) < n_drafts[:, None]  # (R, G)
    return (accepted & real).long().cumprod(dim=1).sum(dim=1)


def verify_greedy(drafts: torch.Tensor, n_drafts: torch.Tensor, target_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy verification.

    drafts (R, G), n_drafts (R,), target_logits (R, G+1, V) over [pending token, drafts].
    Returns n_accepted (R,) and next_token (R,): the target's argmax after the accepted prefix.
    """
    target_tokens = target_logits.argmax(dim=-1)  # (R, G+1)
    G = drafts.shape[1]
    n_accepted = _accepted_prefix(drafts == target_tokens[:, :G], n_drafts)
    next_token = target_tokens.gather(1, n_accepted[:, None]).squeeze(1)
    return n_accepted, next_token


def verify_sampling(
    drafts: torch.Tensor,
    n_drafts: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rejection-sampling verification (exact for any q, greedy rows included as one-hot p and q).

    drafts (R, G), n_drafts (R,), draft_probs q (R, G, V) or None for a deterministic proposer
    (q = one-hot of the draft), target_probs p (R, G+1, V) over [pending token, drafts].
    Returns n_accepted (R,) and next_token (R,).
    """
    R, G = drafts.shape
    V = target_probs.shape[-1]
    if draft_probs is None:
        draft_probs = F.one_hot(drafts, V).to(target_probs.dtype)  # (R, G, V)
    p_draft = target_probs[:, :G].gather(-1, drafts[..., None]).squeeze(-1)  # (R, G)
    q_draft = draft_probs.gather(-1, drafts[..., None]).squeeze(-1)  # (R, G)
    u = torch.rand((R, G), generator=generator, device=drafts.device)
    # u < p/q, written without the division (q > 0 for a token drawn from q).
    n_accepted = _accepted_prefix(u * q_draft < p_draft, n_drafts)  # (R,)

    # Next token: residual norm(max(0, p_j - q_j)) at the first rejection j, or p at the bonus slot.
    index = n_accepted[:, None, None].expand(R, 1, V)
    p_next = target_probs.gather(1, index).squeeze(1)  # (R, V)
    residual_all = torch.cat([(target_probs[:, :G] - draft_probs).clamp_min(0), target_probs[:, G:]], dim=1)
    residual = residual_all.gather(1, index).squeeze(1)  # (R, V)
    all_accepted = (n_accepted == n_drafts)[:, None]
    # p == q makes the residual all zero, but then rejection had probability 0: fall back to p for
    # the rounding-level cases where it still happened.
    usable = residual.sum(-1, keepdim=True) > 0
    next_probs = torch.where(all_accepted | ~usable, p_next, residual)
    return n_accepted, sample(next_probs, generator)
