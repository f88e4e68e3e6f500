"""``autotune validate``: serve a profile's export as written and check its figures under load.

A study measures each configuration through the engine it tuned with; what a team deploys is the
exported server. This package starts the exported ``vllm serve`` script (the bytes ``autotune
export --format vllm`` writes) next to two reference servers — the best single fixed depth and no
speculation — drives each with our load generator (:func:`autotune.engines.vllm.client.run_stream`:
the steady-state stream a study measures, :mod:`autotune.analysis.steady`) at the profile's
concurrency levels in alternating rounds, and reports every figure with its interval over the runs,
with the gap between the tuned and the served throughput (docs/validation.md).

One responsibility per module: :mod:`.install` finds vLLM's executables, :mod:`.variants` writes
the three servers' scripts, :mod:`.metrics` reads the server's speculative-decoding counters,
:mod:`.figures` turns runs into estimates, :mod:`.results` holds the result and its JSON shape,
:mod:`.table` prints it, :mod:`.progress` says what runs, and :mod:`.runner` runs it all (servers
started and watched by :class:`autotune.engines.vllm.server.Server`) and stores the result.
"""

from autotune.validation.results import PointResult, ServerResult, ValidationResult
from autotune.validation.runner import DEFAULT_RUNS, ValidationOptions, validate

__all__ = ["DEFAULT_RUNS", "PointResult", "ServerResult", "ValidationOptions", "ValidationResult", "validate"]
