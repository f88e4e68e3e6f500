"""How the engines hosted in worker processes (TensorRT-LLM, vLLM) turn their packages' exceptions
into the failures the worker reports: one line of text, and out-of-memory as ``MemoryError``
(:func:`classify` reports that as kind ``oom``), and which kind of failure an exception is."""

from __future__ import annotations

import traceback
from pathlib import Path

from autotune.errors import AutotuneError, UnsupportedConfigError

# Texts of out-of-memory errors that engines wrap in RuntimeError and the like (CUDA's, kept in the
# message by TensorRT-LLM's RequestError and vLLM alike).
OUT_OF_MEMORY_MARKERS = ("out of memory", "outofmemory")
# Allocation failures that arrive as other exception types: CUDA's and the engines' texts, and
# ENOMEM as torch's CPU allocator words it.
ALLOCATION_FAILURE_MARKERS = OUT_OF_MEMORY_MARKERS + ("can't allocate memory", "cannot allocate memory")


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, or its type's name when it has none."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def raise_out_of_memory(exc: BaseException, markers: tuple[str, ...] = OUT_OF_MEMORY_MARKERS) -> None:
    """Re-raise ``exc`` as MemoryError (its first line) when its text names one of ``markers``."""
    if _mentions(exc, markers):
        raise MemoryError(first_line(exc)) from exc


def _mentions(exc: BaseException, markers: tuple[str, ...]) -> bool:
    """Whether ``exc``'s text names one of ``markers`` (lower case)."""
    text = str(exc).lower()
    return any(marker in text for marker in markers)


def classify(exc: BaseException) -> tuple[str, str]:
    """(kind, reason) of an exception raised in an engine's worker child (the kinds: engines/worker.py)."""
    line = first_line(exc) if str(exc).strip() else ""
    reason = f"{type(exc).__name__}: {line}" if line else type(exc).__name__
    if (isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"  # torch's, by name
            or _mentions(exc, ALLOCATION_FAILURE_MARKERS)):
        return "oom", reason
    if isinstance(exc, UnsupportedConfigError):
        return "unsupported", line
    if isinstance(exc, AutotuneError):
        return "engine_error", line
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    return "crash", reason + (f" (at {Path(where.filename).name}:{where.lineno})" if where else "")
