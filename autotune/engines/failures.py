"""How the engines hosted in worker processes (TensorRT-LLM, vLLM) turn their packages' exceptions
into the failures the worker reports: one line of text, and out-of-memory as ``MemoryError``
(:func:`autotune.engines.worker._classify` reports that as kind ``oom``)."""

from __future__ import annotations

# Texts of out-of-memory errors that engines wrap in RuntimeError and the like (CUDA's, kept in the
# message by TensorRT-LLM's RequestError and vLLM alike).
OUT_OF_MEMORY_MARKERS = ("out of memory", "outofmemory")


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, or its type's name when it has none."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def raise_out_of_memory(exc: BaseException, markers: tuple[str, ...] = OUT_OF_MEMORY_MARKERS) -> None:
    """Re-raise ``exc`` as MemoryError (its first line) when its text names one of ``markers``."""
    text = str(exc).lower()
    if any(marker in text for marker in markers):
        raise MemoryError(first_line(exc)) from exc
