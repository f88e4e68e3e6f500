"""N-gram proposer (prompt lookup decoding): copy what followed the last n tokens before.

For n = max_ngram down to 1, find the most recent earlier occurrence of the sequence's last n
tokens in its prompt + generated text and propose up to ``depth`` tokens that followed it. No
match: no drafts (that step is a plain target step). No model, so q is the one-hot of the draft.

Each slot keeps, per n, a dict from n-gram to the end position of its latest occurrence, updated
with the positions committed since the last step, so a lookup is O(1) instead of a scan.
"""

from __future__ import annotations

import torch

from autotune.engines.embedded.batch import DecodeState, Proposal, Rows
from autotune.engines.limits import DEFAULT_MAX_NGRAM


class NgramProposer:
    """Prompt-lookup drafts of up to ``depth`` tokens from the sequence's own history."""

    def __init__(self, depth: int, batch_size: int, max_ngram: int = DEFAULT_MAX_NGRAM) -> None:
        if max_ngram < 1:
            raise ValueError(f"max_ngram must be >= 1, got {max_ngram}")
        self.depth = depth
        self.max_ngram = max_ngram
        self.latest_end: list[list[dict[tuple[int, ...], int]]] = []  # [slot][n]; n = 0 unused
        self.indexed: list[int] = []  # per slot: positions whose ending n-grams are in latest_end
        for _ in range(batch_size):
            self.latest_end.append([{} for _ in range(max_ngram + 1)])
            self.indexed.append(0)

    def admit(self, state: DecodeState, rows: Rows, prompt_hidden: torch.Tensor, prompt_lengths: list[int]) -> None:
        for slot in rows.slots:
            self.latest_end[slot] = [{} for _ in range(self.max_ngram + 1)]
            self.indexed[slot] = 0

    def propose(self, state: DecodeState, rows: Rows) -> Proposal:
        drafts = [self.lookup(slot, state.sequences[slot]) for slot in rows.slots]
        counts_host = [len(d) for d in drafts]
        width = max(counts_host)
        padded = [d + [0] * (width - len(d)) for d in drafts]
        device = rows.index.device
        tokens = torch.tensor(padded, dtype=torch.long, device=device).view(len(rows), width)
        return Proposal(tokens, torch.tensor(counts_host, device=device), counts_host)

    def lookup(self, slot: int, sequence: list[int]) -> list[int]:
        """Up to ``depth`` tokens that followed the latest earlier occurrence of the longest
        matching suffix (n <= max_ngram) of ``sequence``; [] when none matches."""
        latest_end = self.latest_end[slot]
        last = len(sequence) - 1
        # Index the n-grams ending before the last position (the suffix itself is no earlier occurrence).
        for end in range(self.indexed[slot], last):
            for n in range(1, min(self.max_ngram, end + 1) + 1):
                latest_end[n][tuple(sequence[end - n + 1 : end + 1])] = end
        self.indexed[slot] = max(self.indexed[slot], last)
        for n in range(min(self.max_ngram, len(sequence)), 0, -1):
            end = latest_end[n].get(tuple(sequence[-n:]))
            if end is not None:
                return sequence[end + 1 : end + 1 + self.depth]
        return []

    def commit(self, state: DecodeState, rows: Rows, target_hidden: torch.Tensor, n_accepted: list[int]) -> None:
        """Nothing to roll back: lookups read the committed tokens."""

    def nbytes(self) -> int:
        return 0
