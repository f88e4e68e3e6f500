"""MTP proposer: the target's own multi-token-prediction modules draft the tokens.

Indexing (DeepSeek-V3): the target's hidden h_i at position i predicts t_{i+1}; module k at
position i reads the previous depth's hidden h^k_i (h^0 = target) and t_{i+k+1}, and predicts
t_{i+k+2}. With N committed tokens and the target cache at L = N - 1 positions, module k at the
last position L - 1 reads t_{L+k}, i.e. the pending token for k = 0 and draft d_k after, and
predicts d_{k+1}: the modules chain into K = min(depth, n_mtp) drafts.

Depths beyond the number of modules REUSE THE LAST MODULE autoregressively, as TensorRT-LLM's
MTP-Eagle mode does: it runs at the next position with its own output hidden and its own predicted
token as inputs.

Caches: each module has a KV cache over positions (one layer each of ``new_mtp_cache``, shared
lengths). All used modules advance together over positions S..L-1, where S is the number of
positions every module computed from committed tokens only. A module-k entry at position i depends
on t_{i+1}..t_{i+k+1}, so after a step that accepted a drafts it stays valid for i <= L_new - 1 - k;
entries of the reused last module past L - 1 were computed from its own hidden and never stay.
Hence S_new = min(L_old, L_new - K), and the next step recomputes positions S_new..L_new - 1 (its
first positions fill the caches with the newly accepted tokens, its last one yields the drafts).
The target's hidden states are kept per position, since module 0 reads them there.
"""

from __future__ import annotations

import torch

from autotune.engines.embedded.batch import DecodeState, Proposal, Rows
from autotune.engines.embedded.network import CausalLM
from autotune.engines.embedded.proposers import draw, last_real, stack_drafts


class MtpProposer:
    """Drafts ``depth`` tokens with the target's MTP modules (see the module docstring)."""

    def __init__(self, target: CausalLM, depth: int, batch_size: int, capacity: int) -> None:
        self.target = target
        self.depth = depth
        self.modules_used = min(depth, target.config.n_mtp)  # K
        self.cache = target.new_mtp_cache(batch_size, capacity)
        weight = target.embed.weight
        self.target_hidden = torch.zeros(  # (B, capacity, C): h_i per slot and position
            batch_size, capacity, target.config.d_model, device=weight.device, dtype=weight.dtype
        )
        self.valid = [0] * batch_size  # S per slot: positions every module holds from committed tokens

    def admit(self, state: DecodeState, rows: Rows, prompt_hidden: torch.Tensor, prompt_lengths: list[int]) -> None:
        self.target_hidden[rows.index, : prompt_hidden.shape[1]] = prompt_hidden
        # Positions 0..P-K-1 read committed tokens only (t_{i+k+1} <= t_{P-1}).
        counts = [max(0, length - self.modules_used) for length in prompt_lengths]
        self._run_modules(state, rows, [0] * len(rows), counts)
        for slot, count in zip(rows.slots, counts):
            self.valid[slot] = count

    def propose(self, state: DecodeState, rows: Rows) -> Proposal:
        L = rows.committed - 1  # (R,) target cache lengths
        starts = [self.valid[s] for s in rows.slots]
        counts = [n - 1 - start for n, start in zip(rows.committed_host, starts)]  # >= 1
        counts_t = torch.tensor(counts, device=L.device)
        tokens: list[torch.Tensor] = []
        probs: list[torch.Tensor | None] = []

        def emit(k: int, logits: torch.Tensor, hidden: torch.Tensor) -> None:
            # Module k at position L-1 drafts d_{k+1} = t_{L+k+1}; module k+1 reads it there.
            token, q = draw(last_real(logits, counts_t), rows, state.generator)
            state.write_tokens(rows, L + k + 1, token[:, None])
            tokens.append(token)
            probs.append(q)

        hidden = self._run_modules(state, rows, starts, counts, emit)
        hidden = last_real(hidden, counts_t)[:, None]  # (R, 1, C)
        last = self.modules_used - 1
        for _ in range(self.depth - self.modules_used):
            logits, hidden = self.target.mtp_forward(last, hidden, tokens[-1][:, None], self.cache, slots=rows.slots_arg)
            token, q = draw(logits[:, 0], rows, state.generator)
            tokens.append(token)
            probs.append(q)
        return stack_drafts(tokens, probs, rows)

    def commit(self, state: DecodeState, rows: Rows, target_hidden: torch.Tensor, n_accepted: list[int]) -> None:
        L_old = rows.committed - 1
        positions = L_old[:, None] + torch.arange(target_hidden.shape[1], device=L_old.device)  # (R, 1+G)
        capacity = self.target_hidden.shape[1]
        # Positions past the accepted ones hold rejected drafts' states; later steps overwrite them.
        self.target_hidden[rows.index[:, None], positions.clamp(max=capacity - 1)] = target_hidden
        for slot, n, a in zip(rows.slots, rows.committed_host, n_accepted):
            l_old, l_new = n - 1, n + a
            self.valid[slot] = max(0, min(l_old, l_new - self.modules_used))

    def _run_modules(self, state: DecodeState, rows: Rows, starts: list[int], counts: list[int], emit=None):
        """Run modules 0..K-1 over positions starts[r] .. starts[r] + counts[r] - 1 of each row,
        calling ``emit(k, logits, hidden)`` after module k. Returns the last module's hidden
        (R, T, C), or None when there is nothing to run."""
        T = max(counts)
        if T == 0:
            return None
        device = rows.index.device
        starts_t = torch.tensor(starts, device=device)
        positions = starts_t[:, None] + torch.arange(T, device=device)  # (R, T)
        capacity = self.target_hidden.shape[1]
        hidden = self.target_hidden[rows.index[:, None], positions.clamp(max=capacity - 1)]  # (R, T, C)
        self.cache.lengths[rows.index] = starts_t
        no_advance = torch.zeros(len(rows), dtype=torch.long, device=device)
        for k in range(self.modules_used):
            next_tokens = state.gather_tokens(rows, positions + k + 1)  # t_{i+k+1}, (R, T)
            # The modules share the cache lengths: only the last one advances them.
            n_new = torch.tensor(counts, device=device) if k == self.modules_used - 1 else no_advance
            logits, hidden = self.target.mtp_forward(k, hidden, next_tokens, self.cache, n_new=n_new, slots=rows.slots_arg)
            if emit is not None:
                emit(k, logits, hidden)
        return hidden

    def nbytes(self) -> int:
        return self.cache.nbytes() + self.target_hidden.nbytes
