"""``autotune validate``: load the profile, check what it needs before starting anything, run the
three servers one after the other under ``vllm bench serve``, and store the result with the profile.

Order of checks (each one line, exit 2, nothing stored, nothing started): the profile exists; the
engine is vLLM; the profile's model folders exist here; the workload is the study's; a port given
with --port is free; vLLM is installed. Then each server is started, measured and stopped (always:
:class:`autotune.validation.server.Server`); the result is stored only when every server finished.
"""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autotune.engines.vllm.mapping import VLLM_OFF_RULE
from autotune.errors import ConfigurationError, EngineError, WorkloadError
from autotune.profiles.data import DeploymentProfile
from autotune.serving.offstate import deployed_plan
from autotune.validation.figures import estimates, tuned_gap
from autotune.validation.install import VllmInstall, find_vllm
from autotune.validation.loadgen import RunFigures, bench_command, num_prompts, read_result, write_dataset
from autotune.validation.metrics import SpecCounters
from autotune.validation.results import PointResult, ServerResult, ValidationResult
from autotune.validation.server import DEFAULT_START_TIMEOUT_S, Server, check_port_free, free_port
from autotune.validation.variants import SCHEDULE, ServerVariant, server_variants
from autotune.workload import Workload, builtin_workload, load_workload

DEFAULT_RUNS = 3
ENGINES = ("vllm",)
BENCH_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class ValidationOptions:
    """How to validate: ``concurrency`` levels (default: the profile's batch sizes), ``runs`` per
    point, the vLLM venv's ``vllm_python`` (default: found on PATH), a ``port`` (default: a free one),
    seconds a server may take to answer /health, the ``workload`` file when the study's is not the
    built-in one, and ``server_args`` appended to every server's command line (the exported script
    passes its arguments on to ``vllm serve``; e.g. --enforce-eager)."""

    engine: str = "vllm"
    concurrency: Sequence[int] | None = None
    runs: int = DEFAULT_RUNS
    vllm_python: str | Path | None = None
    port: int | None = None
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    workload: str | Path | None = None
    server_args: Sequence[str] = field(default_factory=tuple)

    def check(self) -> None:
        """ConfigurationError for values no run could use."""
        if self.engine not in ENGINES:
            raise ConfigurationError(f"autotune validate runs on {', '.join(ENGINES)} here; TensorRT-LLM's "
                                     "validation is scripts/gpu_smoke_trtllm.sh (docs/validation.md)")
        if self.runs < 1:
            raise ConfigurationError(f"--runs must be >= 1, got {self.runs}")
        if self.concurrency is not None and (not self.concurrency or min(self.concurrency) < 1):
            raise ConfigurationError("--concurrency takes positive integers, e.g. 1,2,4")
        if self.start_timeout_s <= 0:
            raise ConfigurationError(f"--start-timeout must be > 0 seconds, got {self.start_timeout_s:g}")


def validate(db_url: str | None, profile_id: int, options: ValidationOptions = ValidationOptions(),
             progress: Callable[[str], None] | None = None) -> ValidationResult:
    """Serve profile ``profile_id``'s vLLM export next to the best fixed depth and none, measure each
    under ``vllm bench serve``, store and return the result (module doc for the checks)."""
    from autotune.profiles.query import show_profile
    from autotune.serving.speculation import with_draft_config

    say = progress or (lambda _line: None)
    options.check()
    # The profile as `autotune export` loads it, so the schedule server runs the same bytes.
    profile = with_draft_config(show_profile(db_url, profile_id, with_measurements=True))
    check_model_folders(profile)
    workload = study_workload(profile, options.workload)
    if options.port is not None:
        check_port_free(options.port)
    variants = server_variants(profile)
    levels = sorted(set(options.concurrency or serving_batch_sizes(profile)))
    work = Path(tempfile.mkdtemp(prefix="autotune-validate-"))
    try:
        vllm = find_vllm(options.vllm_python, work / "bin")
        say(f"validating profile {profile_id} on vLLM {vllm.version}: {', '.join(v.label for v in variants)} at "
            f"concurrency {', '.join(map(str, levels))}, {options.runs} run(s) each; work files in {work}")
        dataset = write_dataset(workload, work / "workload.jsonl")
        servers = [_measure_server(variant, vllm, dataset, workload, levels, options, profile, work, say)
                   for variant in variants]
    except BaseException:
        if not any(work.glob("*.log")):  # nothing started: nothing to read; a server's log is kept
            shutil.rmtree(work, ignore_errors=True)
        raise
    tuned = {c: tuned_tokens_per_s(profile, c) for c in levels}
    reference = next((s for s in servers if s.name == SCHEDULE), servers[0])
    gaps = {c: _gap(reference.point(c), tuned[c]) for c in levels}
    result = ValidationResult(profile_id, options.engine, vllm.version, levels, options.runs, workload.label,
                              dict(profile.study.slo), servers, tuned, gaps, dt.datetime.now(dt.timezone.utc))
    stored = store_validation(db_url, result)
    shutil.rmtree(work, ignore_errors=True)  # kept on failure: the server logs say what went wrong
    return stored


def check_model_folders(profile: DeploymentProfile) -> None:
    """ConfigurationError unless the target (and the draft of a draft profile) are folders here:
    vLLM serves Hugging Face folders, and a missing one would only fail minutes into a start."""
    models = [("target", profile.target)] + ([("draft", profile.draft)] if profile.method == "draft" else [])
    for role, model in models:
        if model is None:
            raise ConfigurationError(f"profile {profile.id} names no {role} model")
        if model.is_builtin:
            raise ConfigurationError(
                f"profile {profile.id}'s {role} is the built-in {model.name}, which vLLM cannot load: tune with "
                "--engine vllm on folders written by `autotune models export-hf` and validate that profile")
        if not (Path(model.source) / "config.json").is_file():
            raise ConfigurationError(f"profile {profile.id}'s {role} model folder {model.source} is missing here "
                                     "(no config.json): validate where the study's model folders are")


def study_workload(profile: DeploymentProfile, path: str | Path | None) -> Workload:
    """The study's workload: ``path`` when given (its content must be the study's), else the built-in
    one when the study ran on it; WorkloadError otherwise, naming what to pass."""
    fingerprint = profile.study.workload_fingerprint
    if path is None:
        builtin = builtin_workload()
        if profile.study.workload_name in (builtin.label, builtin.name) or fingerprint == builtin.sha256:
            return builtin
        raise WorkloadError(f"profile {profile.id}'s study ran on workload {profile.study.workload_name!r}: pass its "
                            "JSONL file with --workload")
    workload = load_workload(path)
    if workload.sha256 != fingerprint:
        raise WorkloadError(f"workload {path} is not the one profile {profile.id}'s study ran on "
                            f"({profile.study.workload_name!r}, sha256 {fingerprint[:12]}...)")
    return workload


def serving_batch_sizes(profile: DeploymentProfile) -> list[int]:
    """The batch sizes the profile's table holds, else the profile's own batch size."""
    sizes = sorted({int(row["batch_size"]) for row in profile.per_batch_size if "batch_size" in row})
    return sizes or [profile.batch_size]


def tuned_tokens_per_s(profile: DeploymentProfile, batch_size: int) -> float | None:
    """The study's figure for what the schedule server runs at ``batch_size``: its table's tokens/s
    there, and where none won and the server runs a measured off state instead (vLLM's K = 0, or a
    measured depth: :func:`autotune.serving.offstate.off_states`), none's figure times that off
    state's measured ratio to none (the served K = 0 is compared with K = 0's figure, not with
    none's). None where the study did not measure that batch size."""
    figure = next((float(row["tokens_per_s"]) for row in profile.per_batch_size
                   if row.get("batch_size") == batch_size and row.get("tokens_per_s") is not None), None)
    state = deployed_plan(profile, VLLM_OFF_RULE).off_states.get(batch_size) if profile.method != "none" else None
    if figure is None or state is None or state.vs_none is None:
        return figure
    return figure * state.vs_none.value


def store_validation(db_url: str | None, result: ValidationResult) -> ValidationResult:
    """Write ``result`` to the database; the result with its row's id and time."""
    from dataclasses import replace

    from autotune.store import open_database
    from autotune.store.validations import add_validation

    with open_database(db_url) as database, database.session() as session:
        record = add_validation(session, profile_id=result.profile_id, engine=result.engine,
                                engine_version=result.engine_version, runs=result.runs,
                                concurrency=result.concurrency, result=result.to_dict(),
                                created_at=result.created_at)
        return replace(result, id=record.id)


def load_validations(db_url: str | None, profile_id: int) -> list[ValidationResult]:
    """The stored validations of profile ``profile_id``, newest first ([] when never validated)."""
    from dataclasses import replace

    from autotune.store import open_database
    from autotune.store.validations import profile_validations

    with open_database(db_url) as database, database.session() as session:
        return [replace(ValidationResult.from_dict(record.result), id=record.id, profile_id=record.profile_id)
                for record in profile_validations(session, profile_id)]


def _measure_server(variant: ServerVariant, vllm: VllmInstall, dataset: Path, workload: Workload,
                    levels: list[int], options: ValidationOptions, profile: DeploymentProfile, work: Path,
                    say: Callable[[str], None]) -> ServerResult:
    """Start ``variant``'s script, run every concurrency level ``options.runs`` times, stop it."""
    script = work / f"{variant.name}.vllm.sh"
    script.write_text(variant.script, encoding="utf-8")
    script.chmod(0o755)
    port = options.port if options.port is not None else free_port()
    say(f"{variant.name} ({variant.label}): starting {script.name} on port {port}")
    server = Server(script, port, work / f"{variant.name}.log", vllm.env(), list(options.server_args),
                    options.start_timeout_s)
    points = []
    with server:
        say(f"{variant.name}: /health answered after {server.start_s:.0f} s")
        for concurrency in levels:
            runs, counters = [], []
            for run in range(options.runs):
                before = SpecCounters.parse(server.get("/metrics"))
                runs.append(_bench(vllm, server.base_url, dataset, workload, concurrency, profile,
                                   work / f"{variant.name}-c{concurrency}-r{run}.json"))
                counters.append(SpecCounters.parse(server.get("/metrics")).since(before))
                say(f"{variant.name} c={concurrency} run {run + 1}/{options.runs}: "
                    f"{runs[-1].output_tokens_per_s:.1f} tok/s, TPOT p50 {runs[-1].tpot_ms_p50:.1f} ms")
            values = [{**r.to_dict(), "acceptance_rate": c.acceptance_rate, "draft_tokens": c.draft_tokens}
                      for r, c in zip(runs, counters)]
            points.append(PointResult(concurrency, len(runs), estimates(runs, counters), values))
    return ServerResult(variant.name, variant.label, server.start_s, points)


def _bench(vllm: VllmInstall, base_url: str, dataset: Path, workload: Workload, concurrency: int,
           profile: DeploymentProfile, result: Path) -> RunFigures:
    """One timed ``vllm bench serve`` run (warm-up requests first, one per client)."""
    command = bench_command(vllm.command(), base_url, dataset, concurrency, num_prompts(workload, concurrency),
                            concurrency, result, profile.study.slo)
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=vllm.env(), timeout=BENCH_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise EngineError(f"vllm bench serve did not finish within {BENCH_TIMEOUT_S:g} s at concurrency "
                          f"{concurrency}") from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        raise EngineError(f"vllm bench serve failed (status {done.returncode}) at concurrency {concurrency}: "
                          f"{lines[-1] if lines else 'no output'}")
    return read_result(result)


def _gap(point: PointResult | None, tuned: float | None):  # noqa: ANN202 - Estimate | None
    served = point.figure("output_tokens_per_s") if point is not None else None
    return tuned_gap(served, tuned) if served is not None else None
