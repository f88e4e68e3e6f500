"""The names the concurrency axis had before issue 38 ("batch size"), for reading documents written
then: profile exports of format versions 1 and 2 (:mod:`autotune.profiles.transfer`). Stored rows
are renamed by migration 0009, which keeps its own frozen copy of this map."""

from __future__ import annotations

from typing import Any

RENAMED_KEYS = {
    "batch_size": "concurrency", "batch_sizes": "concurrencies", "per_batch_size": "per_concurrency",
    "by_batch_size": "by_concurrency", "best_batch_size": "best_concurrency",
    "bytes_by_batch_size": "bytes_by_concurrency",
}


def with_current_keys(value: Any) -> Any:
    """``value`` (JSON data) with every key :data:`RENAMED_KEYS` names under its current name, at any depth."""
    if isinstance(value, dict):
        return {RENAMED_KEYS.get(key, key): with_current_keys(item) for key, item in value.items()}
    if isinstance(value, list):
        return [with_current_keys(item) for item in value]
    return value
