"""Byte-level tokenizer shared by the embedded target and draft models.

Ids 0..255 are the UTF-8 bytes themselves, so any text round-trips and both models trivially share
one vocabulary; three special ids follow the bytes.
"""

from __future__ import annotations

from collections.abc import Iterable

N_BYTES = 256


class ByteTokenizer:
    """UTF-8 bytes as tokens, plus BOS / EOS / PAD special ids."""

    bos_id: int = N_BYTES
    eos_id: int = N_BYTES + 1
    pad_id: int = N_BYTES + 2
    vocab_size: int = N_BYTES + 3

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        """Token ids of ``text``'s UTF-8 bytes, preceded by BOS when ``add_bos``."""
        if not isinstance(text, str):
            raise TypeError(f"ByteTokenizer.encode expects str, got {type(text).__name__}")
        ids = list(text.encode("utf-8"))
        return [self.bos_id, *ids] if add_bos else ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text of the byte ids in ``ids``; special ids are skipped, invalid UTF-8 becomes U+FFFD."""
        data = bytearray()
        for token in ids:
            token = int(token)
            if not 0 <= token < self.vocab_size:
                raise ValueError(f"token id {token} is outside the vocabulary [0, {self.vocab_size})")
            if token < N_BYTES:
                data.append(token)
        return data.decode("utf-8", errors="replace")
