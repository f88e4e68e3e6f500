"""A plan written as a file: the serving config of its recommended configuration, marked PREDICTED."""

from __future__ import annotations

from pathlib import Path

from autotune.planning.result import DeploymentPlan


def write_plan_export(plan: DeploymentPlan, fmt: str, output: str | Path | None = None, force: bool = False) -> Path:
    """Write ``plan`` as a serving config (``autotune export``'s formats; the header says it is a
    prediction) to ``output``, by default ``profiles/plan__<hardware>__<model>__<config>-c<c><suffix>``."""
    from autotune.serving import DEFAULT_EXPORT_DIR, SUFFIXES, check_format, export_profile, slugify
    from autotune.profiles.files import write_atomic

    check_format(fmt)
    profile = plan.to_profile()
    text = export_profile(profile, fmt)
    if output is None:
        config = profile.method if profile.method == "none" else f"{profile.method}-d{profile.depth}"
        stem = "__".join(["plan", slugify(profile.hardware.name), slugify(profile.target.name),
                          f"{config}-c{profile.concurrency}"])
        output = DEFAULT_EXPORT_DIR / f"{stem}{SUFFIXES[fmt]}"
    path = Path(output)
    return write_atomic(path, text, force=force, executable=path.suffix == ".sh")
