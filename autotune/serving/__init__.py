"""Deployment profile -> serving configuration: TensorRT-LLM YAML, a trtllm-bench re-measurement
script, vLLM and SGLang launch scripts, or the profile itself as JSON.

One writer per engine (:mod:`.trtllm`, :mod:`.vllm`, :mod:`.sglang`). The speculative block of the
TensorRT-LLM and vLLM exports is built by that engine adapter's own mapping
(:mod:`autotune.engines.trtllm.mapping`, :mod:`autotune.engines.vllm.mapping`) from the
configuration the adapter measures (:func:`.speculation.measured_config`), then the per-concurrency
schedule is added: what is deployed is what was measured. SGLang has no adapter; its writer maps
the profile itself.

:func:`export_profile` is pure (profile in, text out); :func:`stored_export` loads a stored profile
and renders it; :func:`write_export` writes that text atomically, by default to ``profiles/`` in
the current folder.

Decision on missing equivalents: every method maps to every engine, so nothing is refused; what an
engine cannot express (SGLang has no per-concurrency speculation switch) is said in a comment at the
top of the script, with the concurrency above which speculation lost. Where speculation lost, the
TensorRT-LLM and vLLM exports serve what their engine's server runs instead of none
(:mod:`.off_depths`, the engine adapter's ``off_rule``). How values are quoted and
comments kept to one line: :mod:`.text`.
"""

from __future__ import annotations

from pathlib import Path

from autotune.engines.trtllm.mapping import TRTLLM_OFF_RULE
from autotune.engines.trtllm.versions import DEFAULT_TRTLLM_VERSION, trtllm_rules
from autotune.engines.vllm.mapping import VLLM_OFF_RULE
from autotune.errors import ConfigurationError
from autotune.profiles import transfer
from autotune.profiles.analysis import serving_schedule
from autotune.profiles.data import DeploymentProfile
from autotune.profiles.files import write_atomic
from autotune.profiles.query import show_profile
from autotune.serving.off_depths import deployed_schedule
from autotune.serving.sglang import sglang_script
from autotune.serving.speculation import with_draft_config
from autotune.serving.text import slugify
from autotune.serving.trtllm import trtllm_bench_script, trtllm_yaml
from autotune.serving.vllm import vllm_script

__all__ = [
    "DEFAULT_EXPORT_DIR", "FORMATS", "SUFFIXES", "check_format", "default_export_path", "export_profile", "slugify",
    "stored_export", "write_export",
]

FORMATS = ("trtllm", "trtllm-bench", "vllm", "sglang", "json")
SUFFIXES = {
    "trtllm": ".trtllm.yaml",
    "trtllm-bench": ".trtllm-bench.sh",
    "vllm": ".vllm.sh",
    "sglang": ".sglang.sh",
    "json": ".json",
}
DEFAULT_EXPORT_DIR = Path("profiles")
# The engine whose meaning of "speculation off" (its adapter's off_rule) each format is served with;
# SGLang has no adapter and no per-concurrency switch (its script says so).
OFF_RULES = {"trtllm": TRTLLM_OFF_RULE, "trtllm-bench": TRTLLM_OFF_RULE, "vllm": VLLM_OFF_RULE}


def export_profile(profile: DeploymentProfile, fmt: str, trtllm_version: str = DEFAULT_TRTLLM_VERSION) -> str:
    """``profile`` as text in format ``fmt`` (one of :data:`FORMATS`); the TensorRT-LLM formats are
    written for ``trtllm_version`` (one of :data:`autotune.engines.trtllm.versions.TRTLLM_VERSIONS`)."""
    check_format(fmt)
    rules = trtllm_rules(trtllm_version)
    profile.validate()
    if fmt == "json":
        return transfer.dumps(profile)
    schedule = deployed_schedule(profile, OFF_RULES[fmt]) if fmt in OFF_RULES else serving_schedule(profile)
    if fmt == "trtllm":
        return trtllm_yaml(profile, schedule, rules)
    if fmt == "trtllm-bench":
        return trtllm_bench_script(profile, schedule, rules.version)
    if fmt == "vllm":
        return vllm_script(profile, schedule)
    return sglang_script(profile, schedule)


def check_format(fmt: str) -> None:
    """ConfigurationError unless ``fmt`` is one of :data:`FORMATS`."""
    if fmt not in FORMATS:
        raise ConfigurationError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")


def write_export(
    db_url: str | None, profile_id: int, fmt: str, output: Path | str | None = None, force: bool = False,
    trtllm_version: str = DEFAULT_TRTLLM_VERSION,
) -> Path:
    """Export stored profile ``profile_id`` to ``output`` (default: :func:`default_export_path`)
    atomically; an existing file is refused unless ``force``. Returns the path written."""
    profile, text = stored_export(db_url, profile_id, fmt, trtllm_version)
    path = Path(output) if output is not None else default_export_path(profile, fmt)
    return write_atomic(path, text, force=force, executable=path.suffix == ".sh")


def stored_export(db_url: str | None, profile_id: int, fmt: str,
                  trtllm_version: str = DEFAULT_TRTLLM_VERSION) -> tuple[DeploymentProfile, str]:
    """Stored profile ``profile_id`` and its text in format ``fmt``: what :func:`write_export`
    writes, for callers that send it elsewhere (the HTTP service)."""
    check_format(fmt)
    trtllm_rules(trtllm_version)  # an unknown version is refused before the database is opened
    profile = with_draft_config(show_profile(db_url, profile_id, with_measurements=True))
    return profile, export_profile(profile, fmt, trtllm_version)


def default_export_path(profile: DeploymentProfile, fmt: str, folder: Path = DEFAULT_EXPORT_DIR) -> Path:
    """``profiles/<hardware>__<model>__<method>[-d<depth>]-c<concurrency><suffix>``, slugified."""
    check_format(fmt)
    config = profile.method if profile.method == "none" else f"{profile.method}-d{profile.depth}"
    stem = "__".join([slugify(profile.hardware.name), slugify(profile.target.name), f"{config}-c{profile.concurrency}"])
    return folder / f"{stem}{SUFFIXES[fmt]}"
