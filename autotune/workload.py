"""Workloads: the prompts a configuration is measured on.

A workload file is JSONL, one request per line::

    {"prompt": "def parse_args(argv):", "max_tokens": 128}
    {"prompt": "class LRUCache:", "max_tokens": 64, "temperature": 0.7}

``prompt`` is required; ``max_tokens`` defaults to 128 and ``temperature`` to 0 (greedy). Blank
lines are ignored. The built-in workload (``autotune/workloads/default.jsonl``) holds Python-code
prompts that suit the built-in byte-level models trained on Python source; its version is bumped
whenever its content changes, so stored measurements stay comparable.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.errors import WorkloadError

BUILTIN_WORKLOAD_NAME = "builtin"
BUILTIN_WORKLOAD_VERSION = 1
BUILTIN_WORKLOAD_DIR = Path(__file__).parent / "workloads"  # package data
BUILTIN_WORKLOAD_FILE = "default.jsonl"
DEFAULT_MAX_TOKENS = 128
REQUEST_KEYS = ("prompt", "max_tokens", "temperature")


@dataclass(frozen=True)
class Request:
    """One generation request: decode up to ``max_tokens`` tokens after ``prompt``."""

    prompt: str
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float = 0.0


@dataclass(frozen=True)
class Workload:
    """A named list of requests; ``version`` is set for the built-in workload only."""

    name: str
    requests: tuple[Request, ...]
    version: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "requests", tuple(self.requests))
        if not self.requests:
            raise WorkloadError(f"workload {self.name!r} has no requests; add at least one prompt")

    @property
    def sha256(self) -> str:
        """Content fingerprint: sha256 of the canonical JSON of the requests (name and formatting excluded)."""
        canonical = json.dumps(
            [[r.prompt, r.max_tokens, float(r.temperature)] for r in self.requests],
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    @property
    def label(self) -> str:
        """``name`` plus ``@v<version>`` when versioned."""
        return self.name if self.version is None else f"{self.name}@v{self.version}"

    def head(self, n: int) -> Workload:
        """The first ``n`` requests as a workload of their own (for quick runs)."""
        if n < 1:
            raise WorkloadError(f"a workload needs at least one request, asked for {n}")
        return Workload(self.name, self.requests[:n], self.version)

    def with_max_tokens(self, max_tokens: int) -> Workload:
        """The same prompts with every request capped at ``max_tokens`` tokens."""
        if max_tokens < 1:
            raise WorkloadError(f"max_tokens must be >= 1, got {max_tokens}")
        capped = tuple(Request(r.prompt, min(r.max_tokens, max_tokens), r.temperature) for r in self.requests)
        return Workload(self.name, capped, self.version)


def first_cycle(values: Sequence[Any], n_requests: int) -> list[Any] | None:
    """The values of a run's first ``n_requests`` requests when the run was the workload's requests in
    whole cycles (the steady-state stream of :mod:`autotune.engines.steady`), else None."""
    if not values or n_requests < 1 or len(values) % n_requests:
        return None
    return list(values[:n_requests])


def builtin_workload() -> Workload:
    """The workload shipped with the package (versioned: see ``BUILTIN_WORKLOAD_VERSION``)."""
    text = (BUILTIN_WORKLOAD_DIR / BUILTIN_WORKLOAD_FILE).read_text(encoding="utf-8")
    return Workload(BUILTIN_WORKLOAD_NAME, parse_requests(text, BUILTIN_WORKLOAD_FILE), BUILTIN_WORKLOAD_VERSION)


def load_workload(path: str | Path | Workload | None = None) -> Workload:
    """The workload in the JSONL file at ``path``; the built-in one for None (a Workload passes through)."""
    if isinstance(path, Workload):
        return path
    if path is None:
        return builtin_workload()
    path = Path(path)
    if not path.is_file():
        raise WorkloadError(f"workload file {path} does not exist; pass a JSONL file with one {{\"prompt\": ...}} per line")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"workload file {path} cannot be read as UTF-8 text ({exc})") from exc
    return Workload(path.stem, parse_requests(text, str(path)))


def parse_requests(text: str, source: str) -> tuple[Request, ...]:
    """Parse JSONL ``text``; errors name ``source`` and the 1-based line number."""
    requests = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            requests.append(_parse_line(line, f"{source}:{number}"))
    if not requests:
        raise WorkloadError(f"workload {source} is empty; add one JSON object per line, e.g. {{\"prompt\": \"def f(\"}}")
    return tuple(requests)


def _parse_line(line: str, where: str) -> Request:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(data, dict):
        raise WorkloadError(f"{where}: expected a JSON object like {{\"prompt\": \"...\"}}, got {type(data).__name__}")
    unknown = sorted(set(data) - set(REQUEST_KEYS))
    if unknown:
        raise WorkloadError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(REQUEST_KEYS)}")
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise WorkloadError(f"{where}: 'prompt' is missing or not a non-empty string")
    max_tokens = data.get("max_tokens", DEFAULT_MAX_TOKENS)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise WorkloadError(f"{where}: 'max_tokens' must be a positive integer, got {max_tokens!r}")
    temperature = data.get("temperature", 0.0)
    if not _is_number(temperature) or not math.isfinite(temperature) or temperature < 0:
        raise WorkloadError(f"{where}: 'temperature' must be a number >= 0, got {temperature!r}")
    return Request(prompt, max_tokens, float(temperature))


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
