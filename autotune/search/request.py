"""A tune request: the options of ``autotune tune`` by their command-line names (``--max-depth`` is
``max_depth``), as a JSON object carries them (``POST /v1/tune``, a stored job), turned into
:class:`~autotune.search.options.TuneOptions`.

Repeatable options are lists (``draft``, ``method``), ``concurrencies`` a list of integers, flags
booleans (``no_confirm``, ``no_explore_beyond``). A name missing (or null) takes the command's default.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from autotune.engines.base import BUILTIN_DRAFT
from autotune.errors import ConfigurationError
from autotune.search.objective import Slo
from autotune.search.options import TuneOptions

DEFAULT_SLO_PERCENTILE = 90  # the command's --slo-percentile default
FIELDS = ("study", "target", "draft", "method", "max_depth", "concurrencies", "sampler", "no_explore_beyond", "seed",
          "trials", "timeout", "trial_timeout", "objective", "slo_tpot_ms", "slo_ttft_ms", "slo_percentile",
          "workload", "retry_failed", "no_confirm", "precision", "max_repetitions", "confirm_seconds", "engine")
# The fields that name files: the service and the worker keep them under the model roots.
PATH_FIELDS = ("target", "draft", "workload")


def tune_options(request: Mapping[str, Any], db_url: str | None = None) -> TuneOptions:
    """The options ``request`` asks for (not validated yet: call ``validate()``); ConfigurationError
    naming a field this function does not know."""
    unknown = sorted(set(request) - set(FIELDS))
    if unknown:
        raise ConfigurationError(f"unknown tune option {unknown[0]!r}; known: {', '.join(FIELDS)}")
    get = {name: value for name, value in request.items() if value is not None}.get  # null: the default
    concurrencies = get("concurrencies")
    return TuneOptions(
        db_url=db_url, study_name=get("study"), target=get("target"),
        drafts=tuple(get("draft") or ()) or TuneOptions.drafts, methods=tuple(get("method") or ()) or None,
        max_depth=get("max_depth", TuneOptions.max_depth),
        concurrencies=tuple(concurrencies) if concurrencies is not None else None, sampler=get("sampler"),
        seed=get("seed"), n_trials=get("trials"), timeout_s=get("timeout"), objective=get("objective", "throughput"),
        slo=Slo(get("slo_tpot_ms"), get("slo_ttft_ms"), get("slo_percentile", DEFAULT_SLO_PERCENTILE)),
        trial_timeout_s=get("trial_timeout"), workload=get("workload"), engine=get("engine", TuneOptions.engine),
        retry_failed=get("retry_failed"), confirm=not get("no_confirm", False),
        precision=get("precision", TuneOptions.precision),
        max_repetitions=get("max_repetitions", TuneOptions.max_repetitions),
        confirm_seconds=get("confirm_seconds", TuneOptions.confirm_seconds),
        explore_beyond=not get("no_explore_beyond", False),
    )


def model_paths(options: TuneOptions) -> dict[str, list[str]]:
    """The files ``options`` would read, by request field: the target, the drafts that name a file
    (``builtin`` names none) and the workload. The built-in models and workload are not listed."""
    workload = options.workload
    return {
        "target": [options.target] if options.target is not None else [],
        "draft": [draft for draft in options.drafts if draft != BUILTIN_DRAFT],
        "workload": [str(workload)] if isinstance(workload, (str, PurePath)) else [],
    }
