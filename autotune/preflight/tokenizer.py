"""Does a draft speak the target's tokenizer? Compared field by field from the model folders.

Speculative decoding feeds the target's token ids to the draft and the draft's proposals back to the
target, so both must map ids to the same strings. Compared:

* ``vocab_size`` of config.json: the embedding/LM-head rows. A draft with fewer rows crashes on the
  first id it lacks (Llama 3: 128000 vs 128256, the ids above 128000 are the special tokens); a draft
  with more rows may propose ids the target cannot verify. When only this differs and the tokenizer
  itself is identical and fits in both, the difference is padding: a warning.
* the tokenizer's vocabulary size: distinct ids of tokenizer.json's model vocab plus added tokens;
* the tokenizer's content: sha256 of a canonical form of tokenizer.json's model type, vocab, merges
  and added tokens (key order, whitespace and unrelated settings do not count), or of tokenizer.model
  for SentencePiece-only folders;
* special token ids (BOS, EOS, PAD) gathered from config.json, generation_config.json and
  tokenizer_config.json: a different BOS is an error; EOS/PAD sets that share no id are errors, sets
  that overlap but differ (instruct models often list extra EOS ids) are warnings.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from autotune.models.folder import HfModel
from autotune.preflight.report import Check

SPECIAL_ROLES = ("bos", "eos", "pad")


@dataclass(frozen=True)
class TokenizerFacts:
    """What identifies a model's tokenizer (None where the folder does not say)."""

    config_vocab_size: int | None
    tokenizer_size: int | None
    content_sha256: str | None
    special_ids: dict[str, frozenset[int]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "config_vocab_size": self.config_vocab_size,
            "tokenizer_size": self.tokenizer_size,
            "content_sha256": self.content_sha256,
            "special_ids": {role: sorted(ids) for role, ids in self.special_ids.items()},
        }


def tokenizer_facts(model: HfModel) -> TokenizerFacts:
    vocab_size = model.param("vocab_size")
    token_ids = _token_ids(model)
    return TokenizerFacts(
        config_vocab_size=int(vocab_size) if vocab_size is not None else None,
        tokenizer_size=max(token_ids.values()) + 1 if token_ids else None,
        content_sha256=content_sha256(model),
        special_ids={role: frozenset(_special_ids(model, role, token_ids)) for role in SPECIAL_ROLES},
    )


def content_sha256(model: HfModel) -> str | None:
    """sha256 of the canonical tokenizer content (module doc); None without tokenizer files."""
    if model.tokenizer:
        body = model.tokenizer.get("model") or {}
        vocab = body.get("vocab")
        canonical = {
            "type": body.get("type"),
            # BPE / WordPiece / WordLevel: {token: id}; Unigram: [[piece, score], ...] in id order.
            "vocab": sorted(vocab.items()) if isinstance(vocab, dict) else vocab,
            "merges": [_merge_pair(merge) for merge in body.get("merges") or []],
            "added": sorted(
                (int(t["id"]), str(t["content"]), bool(t.get("special", False)))
                for t in model.tokenizer.get("added_tokens") or []
            ),
        }
        text = json.dumps(canonical, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
    if model.sentencepiece_sha256:
        return f"sentencepiece:{model.sentencepiece_sha256}"
    return None


def compare_tokenizers(target: HfModel, draft: HfModel, subject: str) -> Check:
    """One ``tokenizer`` check for the pair (see the module doc for what is an error)."""
    ours, theirs = tokenizer_facts(target), tokenizer_facts(draft)
    errors: list[str] = []
    warnings: list[str] = []
    same_content = ours.content_sha256 is not None and ours.content_sha256 == theirs.content_sha256
    if ours.content_sha256 is None or theirs.content_sha256 is None:
        missing = "target" if ours.content_sha256 is None else "draft"
        warnings.append(f"the {missing} has no tokenizer.json or tokenizer.model, so tokenizer contents were not compared")
    elif not same_content:
        errors.append("tokenizer content (sha256 of vocab, merges and added tokens) differs")
    if None not in (ours.tokenizer_size, theirs.tokenizer_size) and ours.tokenizer_size != theirs.tokenizer_size:
        errors.append(f"tokenizer vocabulary {theirs.tokenizer_size} vs {ours.tokenizer_size} ids (draft vs target)")
    if ours.config_vocab_size != theirs.config_vocab_size:
        field = f"vocab_size (config.json) {theirs.config_vocab_size} vs {ours.config_vocab_size} (draft vs target)"
        padding_only = (
            same_content and ours.tokenizer_size is not None and None not in (ours.config_vocab_size, theirs.config_vocab_size)
            and ours.tokenizer_size <= min(ours.config_vocab_size, theirs.config_vocab_size)
        )
        if padding_only:
            warnings.append(f"{field}: only embedding padding, every id of the shared tokenizer exists in both")
        else:
            errors.append(field)
    for role in SPECIAL_ROLES:
        a, b = ours.special_ids[role], theirs.special_ids[role]
        if a == b:
            continue
        field = f"{role}_token_id {_ids(b)} vs {_ids(a)} (draft vs target)"
        if role == "bos" or (a and b and not a & b):
            errors.append(field)
        else:
            warnings.append(field)
    details = {"target": ours.to_dict(), "draft": theirs.to_dict(), "errors": errors, "warnings": warnings}
    if errors:
        return Check("tokenizer", "error", f"draft {draft.path.name}: tokenizer differs from the target's: {'; '.join(errors)}",
                     subject, details)
    if warnings:
        return Check("tokenizer", "warn", f"draft {draft.path.name}: {'; '.join(warnings)}", subject, details)
    return Check("tokenizer", "ok", f"draft {draft.path.name}: same tokenizer as the target", subject, details)


def compare_head_vocabulary(target: HfModel, head: HfModel, subject: str) -> Check:
    """An EAGLE-3 head reads the target's hidden states and tokens and ships no tokenizer of its own:
    only its config.json ``vocab_size`` (the token ids it maps back to) must equal the target's."""
    ours, theirs = target.param("vocab_size"), head.param("vocab_size")
    details = {"target_vocab_size": ours, "head_vocab_size": theirs, "draft_vocab_size": head.param("draft_vocab_size")}
    if ours != theirs:
        return Check("tokenizer", "error", f"EAGLE-3 head {head.path.name}: vocab_size (config.json) {theirs} vs "
                     f"{ours} (head vs target); the head was trained for another target", subject, details)
    return Check("tokenizer", "ok", f"EAGLE-3 head {head.path.name}: uses the target's tokenizer (vocab_size {ours})",
                 subject, details)


def _token_ids(model: HfModel) -> dict[str, int]:
    """token string -> id from tokenizer.json (vocab and added tokens), else tokenizer_config's decoder."""
    ids: dict[str, int] = {}
    body = model.tokenizer.get("model") or {}
    vocab = body.get("vocab")
    if isinstance(vocab, dict):
        ids.update({str(token): int(i) for token, i in vocab.items()})
    elif isinstance(vocab, list):  # Unigram: the position is the id
        ids.update({str(entry[0]): i for i, entry in enumerate(vocab)})
    for token in model.tokenizer.get("added_tokens") or []:
        ids[str(token["content"])] = int(token["id"])
    for i, token in (model.tokenizer_config.get("added_tokens_decoder") or {}).items():
        ids.setdefault(str(token.get("content")), int(i))
    return ids


def _special_ids(model: HfModel, role: str, token_ids: dict[str, int]) -> set[int]:
    found: set[int] = set()
    for source in (model.config, model.config.get("text_config") or {}, model.generation_config):
        value = source.get(f"{role}_token_id")
        found.update(value if isinstance(value, list) else [] if value is None else [value])
    token = model.tokenizer_config.get(f"{role}_token")
    if isinstance(token, dict):
        token = token.get("content")
    if isinstance(token, str) and token in token_ids:
        found.add(token_ids[token])
    return {int(i) for i in found}


def _merge_pair(merge: Any) -> list[str]:
    """Merges are stored as "a b" strings (older files) or [a, b] pairs (newer): compare as pairs."""
    return merge.split(" ", 1) if isinstance(merge, str) else [str(part) for part in merge]


def _ids(ids: frozenset[int]) -> str:
    return "none" if not ids else str(sorted(ids)[0]) if len(ids) == 1 else str(sorted(ids))
