"""The comment lines every export starts with: where the profile comes from and what was measured
(or, for a plan's profile, predicted), and what a serving engine cannot load as it is."""

from __future__ import annotations

from autotune import __version__
from autotune.profiles.data import DeploymentProfile


def header(profile: DeploymentProfile) -> list[str]:
    """The profile, its models, hardware and study, and its measured (or predicted) figures."""
    if profile.details.get("predicted"):
        return _predicted_header(profile)
    draft = f" with draft {profile.draft.name} ({profile.draft.fingerprint})" if profile.draft else ""
    source = f"deployment profile {profile.id if profile.id is not None else '(unsaved)'}"
    if profile.chosen_trial is not None:
        source += f", {'confirmation row' if profile.chosen_phase == 'confirmation' else 'trial'} {profile.chosen_trial}"
    lines = [
        f"autotune {__version__} {source}: {profile.label()}{draft} at concurrency {profile.concurrency}",
        f"target {profile.target.name} ({profile.target.fingerprint}) on {profile.hardware.name} ({profile.hardware.fingerprint})",
        f"study {profile.study.name} ({profile.study.engine} engine, objective {profile.objective}, workload {profile.study.workload_name})",
        "measured: " + measured_text(profile),
    ]
    others = profile.tied_others
    if others:
        lines.append(f"within noise of {', '.join(others)} at concurrency {profile.concurrency}: "
                     f"{profile.label()} is the simplest of them to operate")
    return lines


def predicted_line(profile: DeploymentProfile) -> str:
    """The first line of a plan's export: it is a prediction (``autotune plan``), not a measurement."""
    return f"PREDICTED by autotune plan ({_cost_source(profile)} for {profile.hardware.name}), not measured"


def _cost_source(profile: DeploymentProfile) -> str:
    """What priced a plan's steps: ``roofline``, or ``measured kernels (DATA)`` (autotune.planning)."""
    return str(profile.details.get("source") or "roofline")


def _predicted_header(profile: DeploymentProfile) -> list[str]:
    draft = f" with draft {profile.draft.name} ({profile.draft.fingerprint})" if profile.draft else ""
    return [
        predicted_line(profile),
        f"autotune {__version__} plan: {profile.label()}{draft} at concurrency {profile.concurrency}",
        f"target {profile.target.name} ({profile.target.fingerprint}) on {profile.hardware.name}",
        f"{profile.details.get('acceptance') or f'acceptance measured on workload {profile.study.workload_name}'}; "
        f"step costs from {'a roofline' if _cost_source(profile) == 'roofline' else _cost_source(profile)}, never timed",
        "predicted: " + measured_text(profile),
    ]


def measured_text(profile: DeploymentProfile) -> str:
    """``"841.8 tokens/s ±8.4 % (n=7), 2.19x [1.89, 2.53] vs none, TPOT p50 8.10 ms ±2.0 %, 95 % intervals"``
    for a confirmed profile; the values and ``"one screening run, no interval"`` for one that is not;
    for a plan's profile the predicted values, said to be predicted."""
    if profile.details.get("predicted"):
        return _predicted_text(profile)
    tokens, tpot, speedup = (profile.estimate(name) for name in ("tokens_per_s", "tpot_ms_p50", "speedup"))
    intervals = any(e is not None and e.has_interval for e in (tokens, tpot, speedup))
    figures = []
    if tokens is not None:
        figures.append(f"{tokens.value:.1f} tokens/s" + _width(tokens) + (f" (n={tokens.n})" if tokens.has_interval else ""))
    if speedup is not None and profile.method != "none":
        bounds = f" [{speedup.low:.2f}, {speedup.high:.2f}]" if speedup.has_interval else ""
        figures.append(f"{speedup.value:.2f}x{bounds} vs none")
    if tpot is not None:
        figures.append(f"TPOT p50 {tpot.value:.2f} ms" + _width(tpot))
    if not figures:
        return "no figures stored"
    if intervals:
        return ", ".join(figures) + ", 95 % intervals"
    if profile.confirmed:
        return ", ".join(figures) + f" (n={profile.repetitions}, no interval)"
    return ", ".join(figures) + " (one screening run, no interval)"


def _predicted_text(profile: DeploymentProfile) -> str:
    """``"1234.5 tokens/s [800.2, 1905.0], 2.10x vs none, TPOT p50 1.23 ms (predicted, not measured; ...)"``."""
    figures = []
    if profile.tokens_per_s is not None:
        low, high = profile.details.get("tokens_per_s_low"), profile.details.get("tokens_per_s_high")
        bounds = f" [{low:.1f}, {high:.1f}]" if low is not None and high is not None else ""
        figures.append(f"{profile.tokens_per_s:.1f} tokens/s{bounds}")
    if profile.speedup is not None and profile.method != "none":
        figures.append(f"{profile.speedup:.2f}x vs none")
    if profile.tpot_ms_p50 is not None:
        figures.append(f"TPOT p50 {profile.tpot_ms_p50:.2f} ms")
    return (", ".join(figures) or "no figures") + " (predicted, not measured; 95 % intervals of the prediction)"


def _width(estimate) -> str:  # noqa: ANN001 - autotune.analysis.intervals.Estimate
    width = estimate.relative_half_width
    return "" if width is None else f" ±{100 * width:.1f} %"


def builtin_notes(profile: DeploymentProfile) -> list[str]:
    """A NOTE per built-in model of the profile: a serving engine needs a real checkpoint instead."""
    builtin = [m for m in (profile.target, profile.draft) if m is not None and m.is_builtin]
    return [
        f"NOTE: {m.name} is autotune's built-in {m.role} ({m.source}), not a checkpoint a serving engine "
        "can load: replace it with the path of an equivalent Hugging Face model."
        for m in builtin
    ]
