"""State shared by the decode loop and the proposers: the token buffer and the active rows.

Vocabulary: slot = a row of the caches (0..batch_size-1) that holds one request at a time;
row = a position in the current forward batch (the active slots, in ascending order).
For a sequence with N committed tokens t_0..t_{N-1}, the target cache holds positions
0..N-2 (L = N - 1 of them); t_{N-1} is the pending token fed at the next target pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class DecodeState:
    """Per-slot state of one run.

    ``tokens`` (B, width) long holds each slot's committed tokens; the columns past them are scratch
    where proposers write drafts. ``committed`` mirrors on the host how many tokens each slot has
    committed, ``sequences`` the committed tokens themselves (prompt + generated).
    """

    tokens: torch.Tensor  # (B, width)
    committed: list[int]
    sequences: list[list[int]]
    temperatures: torch.Tensor  # (B,) float
    generator: torch.Generator

    @classmethod
    def empty(cls, batch_size: int, width: int, device: torch.device, seed: int) -> DecodeState:
        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
        return cls(
            tokens=torch.zeros(batch_size, width, dtype=torch.long, device=device),
            committed=[0] * batch_size,
            sequences=[[] for _ in range(batch_size)],
            temperatures=torch.zeros(batch_size, device=device),
            generator=generator,
        )

    def gather_tokens(self, rows: Rows, positions: torch.Tensor) -> torch.Tensor:
        """tokens[slot_r, positions[r, j]] for positions (R, T), clamped into the buffer -> (R, T)."""
        return self.tokens[rows.index[:, None], positions.clamp(max=self.tokens.shape[1] - 1)]

    def write_tokens(self, rows: Rows, start: torch.Tensor, values: torch.Tensor) -> None:
        """tokens[slot_r, start[r] + j] = values[r, j] for values (R, T)."""
        positions = start[:, None] + torch.arange(values.shape[1], device=values.device)
        self.tokens[rows.index[:, None], positions] = values


@dataclass
class Rows:
    """The slots taking part in one forward batch.

    ``index`` (R,) long on the device; ``slots_arg`` is what the model's ``slots`` argument gets:
    None when the rows are slots 0..R-1 in order (the model then reads its cache without copies).
    ``committed`` (R,) and ``committed_host``: N per row at the start of the step;
    ``greedy``: every row decodes at temperature 0.
    """

    slots: list[int]
    index: torch.Tensor
    slots_arg: torch.Tensor | None
    committed_host: list[int]
    committed: torch.Tensor
    temperatures: torch.Tensor
    greedy: bool

    @classmethod
    def of(cls, state: DecodeState, slots: list[int], greedy_host: list[bool]) -> Rows:
        device = state.tokens.device
        index = torch.tensor(slots, dtype=torch.long, device=device)
        committed_host = [state.committed[s] for s in slots]
        return cls(
            slots=slots,
            index=index,
            slots_arg=None if slots == list(range(len(slots))) else index,
            committed_host=committed_host,
            committed=torch.tensor(committed_host, dtype=torch.long, device=device),
            temperatures=state.temperatures[index],
            greedy=all(greedy_host),
        )

    def __len__(self) -> int:
        return len(self.slots)


@dataclass
class Proposal:
    """Draft tokens for one step: ``tokens`` (R, G) right-padded, ``counts`` (R,) real drafts per row
    (also on the host as ``counts_host``), ``probs`` (R, G, V) the draft distribution q they were
    drawn from, or None for a deterministic proposer or greedy decoding."""

    tokens: torch.Tensor
    counts: torch.Tensor
    counts_host: list[int]
    probs: torch.Tensor | None = None

    @classmethod
    def nothing(cls, n_rows: int, device: torch.device) -> Proposal:
        return cls(
            tokens=torch.zeros(n_rows, 0, dtype=torch.long, device=device),
            counts=torch.zeros(n_rows, dtype=torch.long, device=device),
            counts_host=[0] * n_rows,
        )

    @property
    def width(self) -> int:
        return self.tokens.shape[1]
