"""``autotune profiles``: deployment profiles as a line each or in full, their per-concurrency
table, and their figures by request category or carried over to a mix."""

from __future__ import annotations

from autotune.render.console import print_lines, print_rows, stdout
from autotune.render.formats import format_estimate, format_speedup, format_value, short_hardware, table_estimate

# Every column of `profiles list` / `profiles best`; the optional ones go first when the terminal is narrow.
PROFILE_COLUMNS = ["id", "created", "study", "hardware", "model", "config", "draft", "c", "tokens/s", "speedup"]
PROFILE_OPTIONAL = ("created", "study", "draft")


def profile_summary_row(profile, wide: bool = False) -> dict:  # noqa: ANN001 - autotune.profiles.data.DeploymentProfile
    """One line of ``profiles list``: the hardware by its short label unless ``wide``."""
    summary = profile.summary()
    return {
        "id": summary["id"], "created": summary["created_at"], "study": summary["study"],
        "hardware": summary["hardware"] if wide else short_hardware(summary["hardware"]), "model": summary["model"],
        "config": profile.label(), "draft": summary["draft"], "c": summary["concurrency"],
        "tokens/s": summary["tokens_per_s"], "speedup": summary["speedup"],
    }


def print_profiles(profiles: list, title: str, wide: bool = False) -> None:
    """``profiles list`` and ``profiles best``: a line per profile, newest first."""
    print_rows([profile_summary_row(p, wide) for p in profiles], PROFILE_COLUMNS, title=title,
               optional=PROFILE_OPTIONAL, wide=wide)


def concurrency_row(row: dict) -> dict:
    """One line of a profile's per-concurrency table (a ConcurrencyBest dict; tables stored before
    intervals existed lack the interval keys and read as one run)."""
    label = row.get("label") or (None if row.get("method") is None else
                                 row["method"] if row["method"] == "none" else f"{row['method']}@{row.get('depth')}")
    speculation_off = row.get("method") == "none"
    speedup = table_estimate(row, "speedup")
    tied = [t for t in row.get("tied") or [] if t != label]
    return {
        "c": row.get("concurrency"),
        "depth": (0 if speculation_off else row.get("depth")) if label else None,
        "configuration": label,
        "tokens/s": format_estimate(table_estimate(row, "tokens_per_s"), 4),
        "speedup": ("1x (speculation off)" if speculation_off else
                    format_speedup(speedup) if speedup is not None else "-") if label else "-",
        "n": row.get("repetitions") or (1 if label else None),
        "tied": ", ".join(tied) or None,
        "note": row.get("note") or (None if row.get("confirmed") or not label else "screening: one run"),
    }


OFF_STATE_COLUMNS = ["engine", "c", "served instead, vs none"]


def print_profile(profile, wide: bool = False,  # noqa: ANN001 - autotune.profiles.data.DeploymentProfile
                  off_state: dict[str, list[dict]] | None = None) -> None:
    """``autotune profiles show``: the recommendation with its 95 % intervals and n, whether the
    confirmation phase measured it, what it is tied with, and the per-concurrency table (on a narrow
    terminal without depth and n, which the configuration and the intervals already say; ``wide``:
    every column). ``off_state``: :func:`autotune.serving.off_depths.off_state_report`, a table of what
    each engine's server runs where none won."""
    tokens, tpot, speedup = (profile.estimate(name) for name in ("tokens_per_s", "tpot_ms_p50", "speedup"))
    chosen = profile.chosen_trial
    facts = {
        "study": profile.study.name, "hardware": f"{profile.hardware.name} ({profile.hardware.fingerprint})",
        "model": f"{profile.target.name} ({profile.target.fingerprint})",
        "configuration": profile.label() + (f" with draft {profile.draft.name}" if profile.draft else ""),
        "concurrency": profile.concurrency, "objective": profile.objective,
        "tokens/s": format_estimate(tokens, 4),
        "speedup vs none": "1x (baseline)" if profile.method == "none" and speedup else format_speedup(speedup),
        "TPOT p50 ms": format_estimate(tpot, 4),
        "n (repetitions)": profile.repetitions,
        "confirmed": "yes" if profile.confirmed else "no: one screening run, no interval",
        "tied within noise": ", ".join(profile.tied_others) or None,
        "from": None if chosen is None else f"{profile.chosen_phase} trial {chosen}",
    }
    print_rows([{"figure": name, "value": value} for name, value in facts.items()], ["figure", "value"],
               title=f"Deployment profile {profile.id} (95 % intervals)", wide=wide)
    console = stdout()
    if not profile.confirmed:
        console.print("not confirmed: one screening run, no interval and no paired speedup (the confirmation phase "
                      "did not run)")
    tied = profile.tied_others
    if tied:
        console.print(f"tied within noise at concurrency {profile.concurrency}: {profile.label()} and "
                      f"{', '.join(tied)}; {profile.label()} is the simplest to operate")
    table = [concurrency_row(row) for row in profile.per_concurrency]
    if table:
        print_rows(table, list(table[0]), title="Per concurrency: depth to serve (0: speculation off), 95 % intervals",
                   optional=("n", "depth"), wide=wide)
    off = [dict(zip(OFF_STATE_COLUMNS, (engine, state["concurrency"], state["summary"])))
           for engine, states in (off_state or {}).items() for state in states]
    if off:
        print_rows(off, OFF_STATE_COLUMNS, title="Where none won: what a speculative server runs there (not none)",
                   wide=wide)


CATEGORY_COLUMNS = ["category", "acceptance", "95 % interval", "prompts", "requests", "tokens/request", "share"]


def print_categories(by_category, title: str, wide: bool = False) -> None:  # noqa: ANN001 - {category: entry}
    """Acceptance length per request category with its 95 % interval (autotune.analysis.categories)."""
    from autotune.profiles.categories import category_differences, category_rows

    rows = [{"category": row["category"], "acceptance": format_value(row["acceptance_length"]),
             "95 % interval": "-" if row["low"] is None else f"[{row['low']:.3g}, {row['high']:.3g}]",
             "prompts": row["prompts"], "requests": row["requests"],
             "tokens/request": format_value(row["tokens_per_request"]), "share": f"{row['share']:.0%}"}
            for row in category_rows(by_category)]
    print_rows(rows, CATEGORY_COLUMNS, title=title, optional=("share", "tokens/request", "requests"), wide=wide)
    print_lines(category_differences(by_category))


def print_mix(mix, wide: bool = False) -> None:  # noqa: ANN001 - autotune.analysis.mix.MixFigures
    """``profiles show --mix``: the profile's figures carried over to the mix (predicted)."""
    named = ", ".join(f"{name}={share:g}" for name, share in mix.mix.items())
    measured = ", ".join(f"{name}={share:.2f}" for name, share in sorted(mix.measured_mix.items()))
    figures = mix.figures
    facts = {
        "acceptance length": f"{format_estimate(mix.acceptance_length, 4)} (measured mix: "
                             f"{mix.measured_acceptance_length:.4g})",
        "factor on tokens/s": f"{mix.factor:.4f}",
        "tokens/s": format_estimate(figures.get("tokens_per_s"), 4),
        "speedup vs none": format_speedup(figures.get("speedup")),
        "TPOT p50 ms": format_estimate(figures.get("tpot_ms_p50"), 4),
    }
    print_rows([{"figure": name, "value": value} for name, value in facts.items()], ["figure", "value"],
               title=f"PREDICTED for the mix {named} (measured on {measured})", wide=wide)
