"""Proposers: the cheap path that drafts tokens for the target to verify.

Every proposer follows the same life cycle per slot: ``admit`` after the target prefilled a new
request, ``propose`` before each target verification pass, ``commit`` after it (rolling its own
cache back to what the accepted tokens keep valid). Caches are rolled back by setting their
lengths: entries past a cache length are never read.
"""

from __future__ import annotations

from typing import Protocol

import torch

from autotune.engines.embedded.acceptance import sample, token_probabilities
from autotune.engines.embedded.batch import DecodeState, Proposal, Rows
from autotune.engines.embedded.network import CausalLM


class Proposer(Protocol):
    depth: int  # draft tokens per row and step

    def admit(self, state: DecodeState, rows: Rows, prompt_hidden: torch.Tensor, prompt_lengths: list[int]) -> None:
        """Prefill the proposer for requests just admitted into ``rows`` (their prompt and first
        token are committed; ``prompt_hidden`` (R, P, C) is the target's hidden over the prompts)."""

    def propose(self, state: DecodeState, rows: Rows) -> Proposal:
        """Draft tokens that follow each row's committed tokens."""

    def commit(self, state: DecodeState, rows: Rows, target_hidden: torch.Tensor, n_accepted: list[int]) -> None:
        """Keep what the verification accepted. ``rows.committed`` still holds N before the step;
        ``target_hidden`` (R, 1+G, C) is the verification pass's hidden over [pending, drafts]."""

    def nbytes(self) -> int:
        """Bytes of the caches and buffers the proposer allocated."""


def draw(logits: torch.Tensor, rows: Rows, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A draft token per row from logits (R, V): argmax when greedy, else a sample from
    q = softmax(logits / T). Returns the tokens (R,) and q (R, V) (None when greedy)."""
    if rows.greedy:
        return logits.argmax(dim=-1), None
    probs = token_probabilities(logits[:, None], rows.temperatures)[:, 0]  # (R, V)
    return sample(probs, generator), probs


def stack_drafts(tokens: list[torch.Tensor], probs: list[torch.Tensor | None], rows: Rows) -> Proposal:
    """Proposal of one draft per list entry for every row: tokens (R,) each, probs (R, V) or None each."""
    R = len(rows)
    drafts = torch.stack(tokens, dim=1)  # (R, G)
    q = None if probs[0] is None else torch.stack(probs, dim=1)  # (R, G, V)
    counts_host = [len(tokens)] * R
    counts = torch.full((R,), len(tokens), dtype=torch.long, device=drafts.device)
    return Proposal(drafts, counts, counts_host, q)


def last_real(values: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """values (R, T, X) at each row's last real position counts[r] - 1 -> (R, X)."""
    index = (counts - 1)[:, None, None].expand(-1, 1, values.shape[-1])
    return values.gather(1, index).squeeze(1)


class DraftModelProposer:
    """A separate small LM drafts ``depth`` tokens autoregressively with its own KV cache.

    Before drafting it catches up on the committed tokens it has not seen (1 or 2 per step: the
    target's correction, or the last draft plus the bonus token). After verification its cache
    keeps t_0..t_{N-1} and the accepted drafts it fed: length N + min(accepted, depth - 1).
    """

    def __init__(self, draft: CausalLM, depth: int, batch_size: int, capacity: int) -> None:
        self.draft = draft
        self.depth = depth
        self.cache = draft.new_cache(batch_size, capacity)
        self.lengths = [0] * batch_size  # host mirror of cache.lengths

    def admit(self, state: DecodeState, rows: Rows, prompt_hidden: torch.Tensor, prompt_lengths: list[int]) -> None:
        T = max(prompt_lengths)
        self.cache.lengths[rows.index] = 0
        n_new = torch.tensor(prompt_lengths, device=rows.index.device)
        self.draft(state.tokens[rows.index, :T], self.cache, n_new=n_new, slots=rows.slots_arg)
        for slot, length in zip(rows.slots, prompt_lengths):
            self.lengths[slot] = length

    def propose(self, state: DecodeState, rows: Rows) -> Proposal:
        starts_host = [self.lengths[s] for s in rows.slots]
        counts_host = [n - start for n, start in zip(rows.committed_host, starts_host)]
        T = max(counts_host)
        device = rows.index.device
        starts = torch.tensor(starts_host, device=device)
        counts = torch.tensor(counts_host, device=device)
        catch_up = state.gather_tokens(rows, starts[:, None] + torch.arange(T, device=device))  # (R, T)
        logits, _ = self.draft(catch_up, self.cache, n_new=counts, slots=rows.slots_arg)  # (R, T, V)
        token, q = draw(last_real(logits, counts), rows, state.generator)
        tokens, probs = [token], [q]
        for _ in range(self.depth - 1):
            logits, _ = self.draft(token[:, None], self.cache, slots=rows.slots_arg)  # (R, 1, V)
            token, q = draw(logits[:, 0], rows, state.generator)
            tokens.append(token)
            probs.append(q)
        return stack_drafts(tokens, probs, rows)

    def commit(self, state: DecodeState, rows: Rows, target_hidden: torch.Tensor, n_accepted: list[int]) -> None:
        kept = [n + min(a, self.depth - 1) for n, a in zip(rows.committed_host, n_accepted)]
        for slot, length in zip(rows.slots, kept):
            self.lengths[slot] = length
        self.cache.lengths[rows.index] = torch.tensor(kept, device=rows.index.device)

    def nbytes(self) -> int:
        return self.cache.nbytes()
