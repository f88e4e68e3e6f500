"""Workloads: the prompts a configuration is measured on.

A workload file is JSONL, one request per line::

    {"prompt": "def parse_args(argv):", "max_tokens": 128}
    {"prompt": "class LRUCache:", "max_tokens": 64, "temperature": 0.7}

``prompt`` is required; ``max_tokens`` defaults to 128 and ``temperature`` to 0 (greedy);
``category`` (optional) names the kind of request (``code``, ``prose``, ``chat``, ...). Blank lines
are ignored.

Shipped workloads (``autotune/workloads/``, named on the command line: ``--workload code|prose|chat``),
each versioned: the version is bumped whenever its content changes, so stored measurements stay
comparable:

* ``code`` is the built-in default (``default.jsonl``, stored under the name ``builtin``): 16
  Python-code prompts, what the built-in byte-level models were trained on;
* ``prose``: 24 openings of plain English prose;
* ``chat``: 24 turns of 8 multi-turn conversations with a shared system prompt, each turn's prompt
  repeating the conversation so far (the repeated context a chat server sees).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.errors import WorkloadError

BUILTIN_WORKLOAD_NAME = "builtin"
BUILTIN_WORKLOAD_VERSION = 1
BUILTIN_WORKLOAD_DIR = Path(__file__).parent / "workloads"  # package data
BUILTIN_WORKLOAD_FILE = "default.jsonl"
# Shipped workloads by the name the command line takes: (file, name stored, version).
SHIPPED_WORKLOADS = {
    "code": (BUILTIN_WORKLOAD_FILE, BUILTIN_WORKLOAD_NAME, BUILTIN_WORKLOAD_VERSION),
    "prose": ("prose.jsonl", "prose", 1),
    "chat": ("chat.jsonl", "chat", 1),
}
DEFAULT_MAX_TOKENS = 128
REQUEST_KEYS = ("prompt", "max_tokens", "temperature", "category")
CATEGORY = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


@dataclass(frozen=True)
class Request:
    """One generation request: decode up to ``max_tokens`` tokens after ``prompt``."""

    prompt: str
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float = 0.0
    category: str | None = None


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
        """Content fingerprint: sha256 of the canonical JSON of the requests (name and formatting
        excluded; a request's category counts where it has one, so a workload without categories keeps
        the fingerprint it always had)."""
        canonical = json.dumps(
            [[r.prompt, r.max_tokens, float(r.temperature)] + ([r.category] if r.category is not None else [])
             for r in self.requests],
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
        capped = tuple(Request(r.prompt, min(r.max_tokens, max_tokens), r.temperature, r.category) for r in self.requests)
        return Workload(self.name, capped, self.version)


def first_cycle(values: Sequence[Any], n_requests: int) -> list[Any] | None:
    """The values of a run's first ``n_requests`` requests when the run was the workload's requests in
    whole cycles (the steady-state stream of :mod:`autotune.analysis.steady`), else None."""
    if not values or n_requests < 1 or len(values) % n_requests:
        return None
    return list(values[:n_requests])


def builtin_workload() -> Workload:
    """The default workload (``code``; versioned: see ``BUILTIN_WORKLOAD_VERSION``)."""
    return shipped_workload("code")


def shipped_workload(key: str) -> Workload:
    """A workload shipped with the package, by the name the command line takes (module doc)."""
    file, name, version = SHIPPED_WORKLOADS[key]
    text = (BUILTIN_WORKLOAD_DIR / file).read_text(encoding="utf-8")
    return Workload(name, parse_requests(text, file), version)


def load_workload(path: str | Path | Workload | None = None) -> Workload:
    """The workload in the JSONL file at ``path``, or the shipped one of that name (``code``, ``prose``,
    ``chat``) when no such file exists; the default one for None (a Workload passes through)."""
    if isinstance(path, Workload):
        return path
    if path is None:
        return builtin_workload()
    if str(path) in SHIPPED_WORKLOADS and not Path(path).is_file():
        return shipped_workload(str(path))
    path = Path(path)
    if not path.is_file():
        raise WorkloadError(f"workload file {path} does not exist; pass a JSONL file with one {{\"prompt\": ...}} per line, "
                            f"or one of the shipped workloads: {', '.join(SHIPPED_WORKLOADS)}")
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
    category = data.get("category")
    if category is not None and not (isinstance(category, str) and CATEGORY.fullmatch(category)):
        raise WorkloadError(f"{where}: 'category' must be a short lower-case name like \"code\" or \"chat\" "
                            f"(letters, digits, - and _), got {category!r}")
    return Request(prompt, max_tokens, float(temperature), category)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
