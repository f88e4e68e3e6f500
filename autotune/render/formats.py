"""Numbers and names in the words and widths the tables use: significant digits, 95 % intervals,
paired speedups, predictions and their error, short hardware names."""

from __future__ import annotations

import re


def format_value(value: float | None, digits: int = 3) -> str:
    """A number with sensible significant digits, or '-' when unknown."""
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def format_estimate(estimate, digits: int = 3) -> str:  # noqa: ANN001 - autotune.analysis.intervals.Estimate
    """``"412 ±2.1%"`` (the 95 % interval's relative half-width), the value alone without an
    interval, '-' for None."""
    if estimate is None:
        return "-"
    width = estimate.relative_half_width
    value = format_value(estimate.value, digits)
    return value if width is None else f"{value} ±{width:.1%}"


def format_speedup(estimate) -> str:  # noqa: ANN001 - autotune.analysis.intervals.Estimate
    """``"1.84x [1.79, 1.90]"``; ``"1.84x (n=1, no interval)"`` for a single run."""
    if estimate is None:
        return "-"
    if not estimate.has_interval:
        return f"{estimate.value:.2f}x (n={estimate.n}, no interval)"
    return f"{estimate.value:.2f}x [{estimate.low:.2f}, {estimate.high:.2f}]"


def _compact(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def format_prediction(predicted) -> str:  # noqa: ANN001 - autotune.analysis.prediction.Predicted
    """``"1790 [1400,2290]"`` (the 95 % interval, no spaces: the column stays narrow); the value
    alone without an interval; '-' for None."""
    if predicted is None:
        return "-"
    if not predicted.has_interval:
        return _compact(predicted.value)
    return f"{_compact(predicted.value)} [{_compact(predicted.low)},{_compact(predicted.high)}]"


def format_error(error: float | None) -> str:
    """A prediction's relative error, predicted / measured - 1: ``"+7.8%"``; '-' for None."""
    return "-" if error is None else f"{error:+.1%}"


def table_estimate(row: dict, name: str):  # noqa: ANN201 - an Estimate or None
    """The estimate ``name`` of a row of a stored per-concurrency table (tables stored before
    intervals existed lack the interval keys and read as one run); None when it has none."""
    from autotune.analysis.intervals import Estimate

    value = row.get(name)
    if value is None:
        return None
    return Estimate(float(value), row.get(f"{name}_low"), row.get(f"{name}_high"), int(row.get("repetitions") or 1))


def short_hardware(name: str) -> str:
    """A hardware name short enough for a table column: "1x NVIDIA H200" -> "H200", "8x NVIDIA H100
    80GB HBM3" -> "8x H100", "1x NVIDIA A10 + 1x NVIDIA L4" -> "A10+L4", "cpu: AMD EPYC (2 cores,
    24 GiB)" -> "CPU 2c"; a name it does not recognise stays whole."""
    cpu = re.fullmatch(r"cpu: .*\((\d+) cores?,.*\)", name)
    if cpu:
        return f"CPU {cpu.group(1)}c"
    parts = []
    for part in name.split(" + "):
        gpu = re.fullmatch(r"(?:(\d+)x )?NVIDIA ([\w.]+).*", part.strip())
        if gpu is None:
            return name
        count, model = gpu.groups()
        parts.append(model if count in (None, "1") else f"{count}x {model}")
    return "+".join(parts)
