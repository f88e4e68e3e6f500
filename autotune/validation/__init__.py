"""``autotune validate``: serve a profile's export as written and check its figures under load.

A study measures lock-step batches of equal requests; a server batches ragged requests with prefills
between decode steps. This package starts the exported ``vllm serve`` script (the bytes ``autotune
export --format vllm`` writes) next to two reference servers — the best single fixed depth and no
speculation — drives each with vLLM's own load generator (``vllm bench serve``) at the profile's
concurrency levels as concurrency levels, and reports every figure with its interval over the runs, with the gap
between the tuned and the served throughput (docs/validation.md).

One responsibility per module: :mod:`.install` finds vLLM's executables, :mod:`.variants` writes
the three servers' scripts, :mod:`.server` starts and always stops one, :mod:`.loadgen` builds the
``vllm bench serve`` command and reads its result file, :mod:`.metrics` reads the server's
speculative-decoding counters, :mod:`.figures` turns runs into estimates, :mod:`.results` holds
the result and its JSON shape, :mod:`.runner` runs it all and stores the result.
"""

from autotune.validation.results import PointResult, ServerResult, ValidationResult
from autotune.validation.runner import DEFAULT_RUNS, ValidationOptions, validate

__all__ = ["DEFAULT_RUNS", "PointResult", "ServerResult", "ValidationOptions", "ValidationResult", "validate"]
