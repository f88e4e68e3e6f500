"""``autotune plan``: a what-if plan, marked predicted."""

from __future__ import annotations

from rich.table import Table

from autotune.planning import SIMPLER_WITHIN
from autotune.render.console import GIB, stdout
from autotune.render.formats import format_value

def print_plan(plan) -> None:  # noqa: ANN001 - autotune.planning.DeploymentPlan
    """``autotune plan``: the title saying it is predicted, one row per concurrency (best
    configuration, predicted tokens/s with its 95 % interval, speedup, TPOT, memory, fit), the
    basis (acceptance, step costs, calibration), the notes and the warnings."""

    def compact(value: float) -> str:  # 47639 -> "47.6k": keeps the interval column narrow
        for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= scale:
                return f"{value / scale:.3g}{suffix}"
        return format_value(value)

    console = stdout()
    console.print(plan.title, style="bold")
    table = Table(title=f"{plan.target.name} on {plan.hardware.name}, per concurrency")
    wrapping = ("best config", "pred tok/s [95%]")  # the widest cells: on 80 columns, an interval may wrap
    for column in ("c", *wrapping, "speedup", "TPOT ms", "mem GiB", "fits"):
        table.add_column(column, justify="left" if column in ("best config", "fits") else "right",
                         no_wrap=column not in wrapping, min_width=len(column))  # headers stay whole
    for row in plan.rows:
        table.add_row(
            str(row.concurrency), row.label,
            f"{compact(row.predicted_tokens_per_s)} [{compact(row.predicted_tokens_per_s_low)}, "
            f"{compact(row.predicted_tokens_per_s_high)}]",
            f"{row.predicted_speedup:.2f}x", format_value(row.predicted_tpot_ms_p50),
            f"{row.memory_bytes / GIB:.3g}", "yes" if row.fits else f"no (> {row.memory_limit_bytes / GIB:.3g})",
        )
    console.print(table)
    for row in plan.rows:
        if row.leader:
            console.print(f"concurrency {row.concurrency}: {row.label} is within {SIMPLER_WITHIN * 100:g} % of the fastest, {row.leader}, and simpler")
    for line in plan.basis_lines() + plan.notes:
        console.print(line)
    for warning in plan.warnings:
        console.print(f"warning: {warning}", style="yellow")
