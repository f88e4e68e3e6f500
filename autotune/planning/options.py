"""What ``autotune plan`` is asked, checked: :class:`PlanOptions` (the command's options, as
:func:`autotune.api.plan` takes them), and the two parts the planners take besides a
:class:`~autotune.planning.inputs.Deployment`: :class:`Scope` (which requests, concurrencies and
depths) and :class:`GivenAcceptance` (a config's acceptance)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from autotune.errors import ConfigurationError
from autotune.planning.inputs import Deployment
from autotune.workload import Workload

MAX_CONCURRENCY = 4096
MAX_DEPTH = 16


@dataclass(frozen=True)
class Scope:
    """What a plan replays and chooses among: the ``workload`` (a file, a shipped name or a loaded
    one; None: the built-in one for a tuned target, ``--isl/--osl`` requests for a config), the
    ``concurrencies`` (None: the powers of two that fit) and the deepest speculation ``max_depth``
    (None: the deepest measured or given). Checked when built."""

    workload: str | Path | Workload | None = None
    concurrencies: Sequence[int] | None = None
    max_depth: int | None = None

    def __post_init__(self) -> None:
        _checked_sizes(self.concurrencies)
        if self.max_depth is not None and not 1 <= self.max_depth <= MAX_DEPTH:
            raise ConfigurationError(f"--max-depth must be between 1 and {MAX_DEPTH}, got {self.max_depth}")

    @property
    def sizes(self) -> list[int] | None:
        """The concurrencies, sorted and without repeats (None when not given)."""
        return _checked_sizes(self.concurrencies)


def _checked_sizes(concurrencies: Sequence[int] | None) -> list[int] | None:
    """``concurrencies`` sorted and without repeats; a ConfigurationError for one out of range."""
    if concurrencies is None:
        return None
    sizes = sorted(set(concurrencies))
    if not sizes or any(not isinstance(b, int) or isinstance(b, bool) or not 1 <= b <= MAX_CONCURRENCY for b in sizes):
        raise ConfigurationError(f"--concurrency takes integers between 1 and {MAX_CONCURRENCY}, got "
                                 f"{', '.join(map(str, concurrencies)) or 'none'}")
    return sizes


@dataclass(frozen=True)
class GivenAcceptance:
    """Where a plan from a config takes its acceptance, exactly one of: ``rates`` by draft position,
    a ``length`` at a depth (:mod:`autotune.perfmodel.given_acceptance`), or ``proxy``: a tuned
    target whose stored profile stands in. :meth:`check` says when it is not exactly one."""

    rates: Sequence[float] | None = None
    length: tuple[float, int] | None = None
    proxy: str | None = None

    def check(self) -> None:
        if sum(given is not None for given in (self.rates, self.length, self.proxy)) != 1:
            raise ConfigurationError("give the acceptance one way: --acceptance a1,a2,..., --acceptance-length L or "
                                     "--acceptance-from MODEL (or plan a tuned target with --model)")


@dataclass(frozen=True)
class PlanOptions:
    """The options of ``autotune plan``, as the command parses them (field names are its option
    names; ``acceptance``, ``acceptance_length`` and ``mix`` still text, ``mix`` also a mapping)."""

    hardware: str
    model: str | None = None
    config: str | Path | None = None
    draft_config: str | Path | None = None
    acceptance: str | None = None
    acceptance_length: str | None = None
    acceptance_from: str | None = None
    workload: str | Path | None = None
    isl: int | None = None
    osl: int | None = None
    tp: int = 1
    dtype: str | None = None
    kv_dtype: str | None = None
    engine: str = "trtllm"
    calibration: str = "auto"
    step_costs: str = "auto"
    engine_version: str | None = None
    ep: int = 1
    concurrencies: Sequence[int] | None = None
    max_depth: int | None = None
    export_format: str | None = None
    output: str | Path | None = None
    force: bool = False
    mix: str | Mapping[str, float] | None = None

    def deployment(self) -> Deployment:
        """How the model is served (checked)."""
        return Deployment(tp=self.tp, dtype=self.dtype, kv_dtype=self.kv_dtype, engine=self.engine, isl=self.isl,
                          osl=self.osl, calibration=self.calibration, ep=self.ep, engine_version=self.engine_version,
                          step_costs=self.step_costs)

    def scope(self) -> Scope:
        """What the plan replays and chooses among (checked)."""
        return Scope(self.workload, self.concurrencies, self.max_depth)

    def given_acceptance(self) -> GivenAcceptance:
        """The acceptance options parsed (a ConfigurationError for malformed ones)."""
        from autotune.perfmodel.given_acceptance import parse_length, parse_rates

        return GivenAcceptance(parse_rates(self.acceptance) if self.acceptance is not None else None,
                               parse_length(self.acceptance_length) if self.acceptance_length is not None else None,
                               self.acceptance_from)


def parse_concurrencies(text: str | None) -> tuple[int, ...] | None:
    """``"1,8,64"`` -> (1, 8, 64); a ConfigurationError for anything else."""
    if text is None:
        return None
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ConfigurationError(f"--concurrency must be comma-separated integers, got {text!r}") from None
    _checked_sizes(sizes)
    return sizes
