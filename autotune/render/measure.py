"""``autotune measure``: one configuration's figures with their 95 % intervals, the paired
speedup, and the verification against the baseline."""

from __future__ import annotations

from autotune.render.console import print_rows, stdout
from autotune.render.formats import format_estimate, format_speedup

MEASURE_FIGURES = (  # (label, Measurement attribute, scale): one row each, so the table stays narrow
    ("tokens/s", "tokens_per_s", 1), ("TTFT p50 ms", "ttft_ms_p50", 1), ("TTFT p99 ms", "ttft_ms_p99", 1),
    ("TPOT p50 ms", "tpot_ms_p50", 1), ("TPOT p99 ms", "tpot_ms_p99", 1), ("acceptance", "acceptance_rate", 1),
    ("tokens per target pass", "acceptance_length", 1), ("drafted tokens", "drafted_tokens", 1),
    ("accepted tokens", "accepted_tokens", 1), ("peak memory MiB", "peak_memory_bytes", 2**-20),
    ("wall time s", "wall_time_s", 1),
)


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


def noise_line(repeated) -> str | None:  # noqa: ANN001 - autotune.engines.protocol.RepeatedMeasurement
    """One line when a configuration's figures are noisy (wide interval, or measured under load)."""
    width = repeated.tokens_per_s.relative_half_width
    other = repeated.noise.get("other_cpu_cores_max")
    load = f"; other processes used up to {other:.2f} cores" if other is not None else ""
    if repeated.noisy:
        return f"noisy: {repeated.config.label()} was measured while the machine was busy{load}"
    if width is not None and width > 0.1:
        return f"noisy: {repeated.config.label()} varies by ±{width:.0%} over {repeated.repetitions} runs{load}"
    return None


def print_measure(report) -> None:  # noqa: ANN001 - autotune.measure.MeasureReport (torch-free import avoided)
    """One configuration's figures with their 95 % intervals (a row per figure, a column per
    configuration), the paired speedup, and the verification against the baseline if it ran."""
    m = report.measurement
    runs = {f"{report.config.label()} c{m.concurrency}": report.repeated}
    if report.baseline is not None:
        runs["none (baseline)"] = report.protocol.baseline
    rows = []
    for label, attribute, scale in MEASURE_FIGURES:
        row = {"figure": label}
        for name, run in runs.items():
            estimate = run.estimates.get(attribute)
            row[name] = (format_estimate(estimate.scaled(scale)) if estimate is not None
                         else _scaled(getattr(run.measurement, attribute), scale))
        rows.append(row)
    protocol = report.protocol
    print_rows(rows, ["figure", *runs], title=f"{m.workload_name}: {m.n_requests} requests, {m.output_tokens} tokens, "
                                              f"{report.repeated.repetitions} runs each, 95 % intervals")
    console = stdout()
    if m.acceptance_by_position:
        console.print("acceptance by draft position: " + " ".join(f"{a:.2f}" for a in m.acceptance_by_position))
    if report.speedup is not None:
        console.print(f"speedup over baseline (paired, {report.speedup.n} rounds): {format_speedup(report.speedup)}")
    if protocol.capped:
        console.print(f"stopped at the {protocol.capped} cap before reaching ±{protocol.options.precision:.0%}")
    if protocol.rounds_discarded:
        console.print(f"{protocol.rounds_discarded} round(s) measured again: {protocol.faults[-1]}")
    for run in runs.values():
        line = noise_line(run)
        if line:
            console.print(line)
    if report.outputs_match is not None:
        if report.outputs_match:
            console.print("verify: outputs identical to the baseline, token for token")
        else:
            d = report.first_divergence
            console.print(f"verify: outputs DIFFER — request {d.request_index}, token {d.token_index}: "
                          f"expected {d.expected}, got {d.got} (logit margin {d.logit_margin})")
