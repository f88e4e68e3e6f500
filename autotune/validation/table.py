"""A validation as text: one table row per (concurrency, server) with every figure and its interval,
then per concurrency the schedule's paired ratios to the other servers with their verdicts and the
tuned-vs-served gap. ``autotune validate`` and ``autotune profiles show`` print these; the JSON shape
is :meth:`ValidationResult.to_dict`."""

from __future__ import annotations

from typing import Any

from autotune.analysis.intervals import Estimate
from autotune.validation.results import ValidationResult

COLUMNS = ["c", "server", "config", "tok/s", "TPOT p50", "TPOT p99", "TTFT p50", "TTFT p99", "accept", "occupancy",
           "goodput"]
OPTIONAL = ("goodput", "occupancy", "TTFT p99", "TPOT p99", "config", "accept")
CELLS = {"tok/s": ("output_tokens_per_s", 1), "TPOT p50": ("tpot_ms_p50", 2), "TPOT p99": ("tpot_ms_p99", 2),
         "TTFT p50": ("ttft_ms_p50", 1), "TTFT p99": ("ttft_ms_p99", 1), "accept": ("acceptance_rate", 3),
         "occupancy": ("occupancy", 2), "goodput": ("goodput_requests_per_s", 2)}


def with_interval(value: Estimate | None, digits: int) -> str:
    """``"412.3 [401.0, 423.6]"``; the value alone for one run; ``-`` when not measured."""
    if value is None:
        return "-"
    if not value.has_interval:
        return f"{value.value:.{digits}f}"
    return f"{value.value:.{digits}f} [{value.low:.{digits}f}, {value.high:.{digits}f}]"


def validation_rows(result: ValidationResult) -> list[dict[str, Any]]:
    """Table rows by concurrency, then server in the order they ran."""
    rows = []
    for concurrency in result.concurrency:
        for server in result.servers:
            point = server.point(concurrency)
            if point is None:
                continue
            row: dict[str, Any] = {"c": concurrency, "server": server.name, "config": server.label}
            for column, (name, digits) in CELLS.items():
                row[column] = with_interval(point.figure(name), digits)
            rows.append(row)
    return rows


def summary_lines(result: ValidationResult) -> list[str]:
    """What follows the table: the schedule's paired ratios (:func:`comparison_lines`), then the gaps."""
    return comparison_lines(result) + gap_lines(result)


def comparison_lines(result: ValidationResult) -> list[str]:
    """Per concurrency and other server: the schedule's paired tok/s ratio to it and the verdict."""
    lines = []
    for item in result.comparisons:
        ratio = item.ratio
        spread = f" [{ratio.low:.3f}, {ratio.high:.3f}]" if ratio.has_interval else " (one round)"
        verdict = (f"schedule >= {item.other}: {item.verdict}" if item.verdict is not None
                   else f"same configuration as {item.other} here: not judged")
        lines.append(f"concurrency {item.concurrency}: schedule / {item.other} = {ratio.value:.3f}{spread} "
                     f"(paired over {ratio.n} round(s)); {verdict}")
    return lines


def gap_lines(result: ValidationResult) -> list[str]:
    """Per concurrency: the served tok/s of the schedule (or only) server against the study's figure."""
    reference = result.server("schedule") or result.servers[0]
    lines = []
    for concurrency in result.concurrency:
        point = reference.point(concurrency)
        served = point.figure("output_tokens_per_s") if point else None
        tuned, gap = result.tuned_tokens_per_s.get(concurrency), result.gaps.get(concurrency)
        if served is None or tuned is None or gap is None:
            lines.append(f"concurrency {concurrency}: the study did not measure it: no tuned figure")
            continue
        spread = f" [{gap.low:+.1%}, {gap.high:+.1%}]" if gap.has_interval else " (one run)"
        lines.append(f"concurrency {concurrency}: served {served.value:.1f} tok/s ({reference.name}) vs tuned "
                     f"{tuned:.1f}: gap {gap.value:+.1%}{spread}")
    return lines


def title(result: ValidationResult) -> str:
    when = result.created_at.strftime("%Y-%m-%d %H:%M UTC")
    ident = f"validation {result.id}" if result.id is not None else "validation"
    return (f"{ident} of profile {result.profile_id} ({when}, vLLM {result.engine_version}, {result.runs} run(s) "
            f"per point, 95 % intervals over the runs)")


def parse_concurrency(text: str | None) -> tuple[int, ...] | None:
    """``"1,2,4"`` -> (1, 2, 4); ConfigurationError for anything else."""
    from autotune.errors import ConfigurationError

    if text is None:
        return None
    try:
        levels = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ConfigurationError(f"--concurrency must be comma-separated integers, e.g. 1,2,4; got {text!r}") from None
    if not levels or min(levels) < 1:
        raise ConfigurationError(f"--concurrency levels must be >= 1, got {text!r}")
    return levels
