"""``autotune validate``: load the profile, check what it needs before starting anything, serve the
three servers in alternating rounds under our load generator, and store the result with the profile.

Order of checks (each one line, exit 2, nothing stored, nothing started): the profile exists; the
engine is vLLM; the profile's model folders exist here; the workload is the study's; a port given
with --port is free; vLLM is installed; the machine has the memory for one server
(:mod:`autotune.engines.vllm.memory`, which also sets every server's memory).

**Rounds.** Round r runs every server once at every concurrency level, the servers in alternating
order (schedule, fixed, none; then none, fixed, schedule; ...), so that a drift of the machine
cancels out of the schedule's paired ratios to the others (:mod:`autotune.validation.figures`), as
the protocol's rounds do for a configuration and its baseline. The servers stay up together when
the machine holds all of them (three vLLM servers of the built-in models take ~6 GiB here; starting
one takes 30-120 s, so restarting per round would cost minutes a round); otherwise each is started for
its turn and stopped after it. Every server is watched (:class:`autotune.engines.vllm.server.Server`):
one that dies stops the validation at once with one line naming it and why, and nothing is stored.
The result is stored only when every round finished.

**Progress**, one line each, to ``progress``: every server start (and every 15 s while one starts),
every run with its figures.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import shutil
import tempfile
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from autotune.analysis.steady import request_stream
from autotune.engines.vllm.mapping import VLLM_OFF_RULE
from autotune.engines.vllm.memory import EngineHost, EngineMemory, engine_memory
from autotune.errors import ConfigurationError, WorkloadError
from autotune.models.folder import read_model
from autotune.profiles.data import DeploymentProfile
from autotune.serving.off_depths import deployed_schedule
from autotune.engines.vllm.client import completion_bodies, run_stream
from autotune.engines.vllm.server import (DEFAULT_START_TIMEOUT_S, HOST, Launch, Server, check_port_free,
                                         engine_core_nice, free_port)
from autotune.validation.figures import Comparison, RunFigures, compare, estimates, run_figures, tuned_gap
from autotune.validation.install import VllmInstall, find_vllm
from autotune.validation.metrics import SpecCounters
from autotune.validation.results import PointResult, ServerResult, ValidationResult
from autotune.validation.variants import FIXED, SCHEDULE, ServerVariant, schedule_depth, server_variants
from autotune.workload import SHIPPED_WORKLOADS, Workload, load_workload, shipped_workload

DEFAULT_RUNS = 3
ENGINES = ("vllm",)


@dataclass(frozen=True)
class ValidationOptions:
    """How to validate: ``concurrency`` levels (default: the profile's concurrency levels), ``runs`` per
    point (round), the vLLM venv's ``vllm_python`` (default: found on PATH), a ``port`` (the first
    server's; the others listen on the ports after it; default: free ones),
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
    """Serve profile ``profile_id``'s vLLM export next to the best fixed depth and none in alternating
    rounds under our load generator, store and return the result (module doc)."""
    from autotune.profiles.query import show_profile
    from autotune.serving.speculation import with_draft_config

    say = progress or (lambda _line: None)
    options.check()
    # The profile as `autotune export` loads it, so the schedule server runs the same bytes.
    profile = with_draft_config(show_profile(db_url, profile_id, with_measurements=True))
    check_model_folders(profile)
    workload = study_workload(profile, options.workload)
    variants = server_variants(profile)
    if options.port is not None:
        for port in range(options.port, options.port + len(variants)):
            check_port_free(port)
    levels = sorted(set(options.concurrency or serving_concurrencies(profile)))
    work = Path(tempfile.mkdtemp(prefix="autotune-validate-"))
    try:
        vllm = find_vllm(options.vllm_python, work / "bin")
        memory = server_memory(profile, len(variants), vllm.on_cpu)
        say(f"validating profile {profile_id} on vLLM {vllm.version}: {', '.join(v.label for v in variants)} at "
            f"concurrency {', '.join(map(str, levels))}, {options.runs} round(s); "
            f"{_at_once_line(memory, len(variants))}; work files in {work}")
        rounds = _Rounds(variants, vllm, memory, workload, levels, options, profile, work, say)
        servers = rounds.run()
    except BaseException:
        if not any(work.glob("*.log")):  # nothing started: nothing to read; a server's log is kept
            shutil.rmtree(work, ignore_errors=True)
        raise
    tuned = {c: tuned_tokens_per_s(profile, c) for c in levels}
    reference = next((s for s in servers if s.name == SCHEDULE), servers[0])
    gaps = {c: _gap(reference.point(c), tuned[c]) for c in levels}
    result = ValidationResult(profile_id, options.engine, vllm.version, levels, options.runs, workload.label,
                              dict(profile.study.slo), servers, tuned, gaps, dt.datetime.now(dt.timezone.utc),
                              comparisons=comparisons(profile, servers, levels),
                              servers_at_once=min(memory.engines, len(variants)))
    stored = store_validation(db_url, result)
    shutil.rmtree(work, ignore_errors=True)  # kept on failure: the server logs say what went wrong
    return stored


def server_memory(profile: DeploymentProfile, servers: int, on_cpu: bool) -> EngineMemory:
    """Each server's memory (:func:`autotune.engines.vllm.memory.engine_memory`), sized for the
    profile's speculative configuration (the largest of the three) at its --max-num-seqs, for all
    ``servers`` up at once where the machine holds them, else for one at a time."""
    deployed = deployed_schedule(profile, VLLM_OFF_RULE)
    target = read_model(profile.target.source, "target")
    draft = read_model(profile.draft.source, "draft") if profile.method == "draft" and profile.draft else None
    return engine_memory(profile.method, target, draft, deployed.max_batch_size, EngineHost(servers, on_cpu, server=True))


def _at_once_line(memory: EngineMemory, servers: int) -> str:
    if memory.engines >= servers:
        return f"the {servers} servers up together, each with {memory.describe()}"
    return f"one server at a time (this machine holds {memory.engines} of {servers}), each with {memory.describe()}"


def comparisons(profile: DeploymentProfile, servers: Sequence[ServerResult], levels: Sequence[int]) -> list[Comparison]:
    """The schedule against each other server at each level, paired run by run (round r with round r)."""
    schedule = next((s for s in servers if s.name == SCHEDULE), None)
    if schedule is None:
        return []
    deployed = deployed_schedule(profile, VLLM_OFF_RULE)
    out = []
    for other in (s for s in servers if s is not schedule):
        fixed_depth = next(v.depth for v in server_variants(profile) if v.name == other.name)
        for level in levels:
            mine, theirs = schedule.point(level), other.point(level)
            if mine is None or theirs is None:
                continue
            out.append(compare(level, other.name, _tokens(mine), _tokens(theirs),
                               differ=other.name != FIXED or schedule_depth(deployed, level) != fixed_depth))
    return out


def _tokens(point: PointResult) -> list[float]:
    return [float(run["output_tokens_per_s"]) for run in point.run_values]


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
    """The study's workload: ``path`` when given (its content must be the study's), else the shipped
    one the study ran on (code, prose, chat: matched by content or name); WorkloadError otherwise,
    naming what to pass."""
    fingerprint = profile.study.workload_fingerprint
    if path is None:
        shipped = next((w for w in map(shipped_workload, SHIPPED_WORKLOADS)
                        if w.sha256 == fingerprint or profile.study.workload_name in (w.label, w.name)), None)
        if shipped is not None:
            return shipped
        raise WorkloadError(f"profile {profile.id}'s study ran on workload {profile.study.workload_name!r}: pass its "
                            "JSONL file with --workload")
    workload = load_workload(path)
    if workload.sha256 != fingerprint:
        raise WorkloadError(f"workload {path} is not the one profile {profile.id}'s study ran on "
                            f"({profile.study.workload_name!r}, sha256 {fingerprint[:12]}...)")
    return workload


def serving_concurrencies(profile: DeploymentProfile) -> list[int]:
    """The concurrency levels the profile's table holds, else the profile's own concurrency."""
    sizes = sorted({int(row["concurrency"]) for row in profile.per_concurrency if "concurrency" in row})
    return sizes or [profile.concurrency]


def tuned_tokens_per_s(profile: DeploymentProfile, concurrency: int) -> float | None:
    """The study's figure for what the schedule server runs at ``concurrency``: its table's tokens/s
    there, and where none won and the server runs a measured off state instead (vLLM's K = 0, or a
    measured depth: :func:`autotune.serving.off_depths.off_states`), none's figure times that off
    state's measured ratio to none (the served K = 0 is compared with K = 0's figure, not with
    none's). None where the study did not measure that concurrency."""
    figure = next((float(row["tokens_per_s"]) for row in profile.per_concurrency
                   if row.get("concurrency") == concurrency and row.get("tokens_per_s") is not None), None)
    state = deployed_schedule(profile, VLLM_OFF_RULE).off_states.get(concurrency) if profile.method != "none" else None
    if figure is None or state is None or state.vs_none is None:
        return figure
    return figure * state.vs_none.value


def store_validation(db_url: str | None, result: ValidationResult) -> ValidationResult:
    """Write ``result`` to the database; the result with its row's id and time."""
    from dataclasses import replace

    from autotune.store import open_database
    from autotune.store.validations import ValidationRun, add_validation

    with open_database(db_url) as database, database.session() as session:
        record = add_validation(session, ValidationRun(result.profile_id, result.engine, result.engine_version,
                                                       result.runs, result.concurrency, result.to_dict(),
                                                       result.created_at))
        return replace(result, id=record.id)


def load_validations(db_url: str | None, profile_id: int) -> list[ValidationResult]:
    """The stored validations of profile ``profile_id``, newest first ([] when never validated)."""
    from dataclasses import replace

    from autotune.store import open_database
    from autotune.store.validations import profile_validations

    with open_database(db_url) as database, database.session() as session:
        return [replace(ValidationResult.from_dict(record.result), id=record.id, profile_id=record.profile_id)
                for record in profile_validations(session, profile_id)]


@dataclass
class _Rounds:
    """The alternating rounds of a validation (module doc): its servers, and per (server, level) the
    runs so far."""

    variants: list[ServerVariant]
    vllm: VllmInstall
    memory: EngineMemory
    workload: Workload
    levels: list[int]
    options: ValidationOptions
    profile: DeploymentProfile
    work: Path
    say: Callable[[str], None]
    runs: dict[tuple[str, int], list[tuple[RunFigures, SpecCounters]]] = field(default_factory=dict)
    models: dict[int, str] = field(default_factory=dict)  # the model name each server (by port) answers to
    up: list[Server] = field(default_factory=list)  # the servers running now, each watched all the time

    def run(self) -> list[ServerResult]:
        together = self.memory.engines >= len(self.variants)
        servers = {variant.name: self._server(variant, index) for index, variant in enumerate(self.variants)}
        with ExitStack() as stack:
            if together:
                for variant in self.variants:
                    self._start(stack, servers[variant.name], variant)
            for round_index in range(self.options.runs):
                order = self.variants if round_index % 2 == 0 else self.variants[::-1]
                for variant in order:
                    server = servers[variant.name]
                    if together:
                        self._round(server, variant, round_index)
                        continue
                    with ExitStack() as turn:
                        self._start(turn, server, variant)
                        self._round(server, variant, round_index)
        return [self._result(variant, servers[variant.name]) for variant in self.variants]

    def _server(self, variant: ServerVariant, index: int) -> Server:
        script = self.work / f"{variant.name}.vllm.sh"
        script.write_text(variant.script, encoding="utf-8")
        script.chmod(0o755)
        port = self.options.port + index if self.options.port is not None else free_port()
        # The memory first: a --server-arg of the user's naming the same flag comes later and wins.
        arguments = [*self.memory.server_arguments(), *self.options.server_args]
        launch = Launch(["bash", str(script), *arguments], self.vllm.env(), cwd=self.work,
                        engine_core_nice=engine_core_nice(self.vllm.on_cpu))
        return Server(f"{variant.name} server ({variant.label})", launch, port, self.work / f"{variant.name}.log",
                      start_timeout_s=self.options.start_timeout_s, say=self.say, watch=self._check_up)

    def _check_up(self) -> None:
        """ServerDied as soon as any server running now is gone (the one measured or one waiting)."""
        for server in self.up:
            server.check()

    def _start(self, stack: ExitStack, server: Server, variant: ServerVariant) -> None:
        self.say(f"{server.name}: starting {variant.name}.vllm.sh on port {server.port}")
        stack.enter_context(server)
        self.up.append(server)
        stack.callback(self.up.remove, server)
        self.models[server.port] = _served_model(server)
        self.say(f"{server.name}: /health answered after {server.start_s:.0f} s")
        self._load(server, max(self.levels), warm_up=True)  # first requests on a fresh server: not measured

    def _round(self, server: Server, variant: ServerVariant, round_index: int) -> None:
        for level in self.levels:
            before = SpecCounters.parse(server.get("/metrics"))
            figures = self._load(server, level)
            counters = SpecCounters.parse(server.get("/metrics")).since(before)
            self.runs.setdefault((variant.name, level), []).append((figures, counters))
            accepted = f", acceptance {counters.acceptance_rate:.3f}" if counters.acceptance_rate is not None else ""
            self.say(f"round {round_index + 1}/{self.options.runs} {variant.name} c={level}: "
                     f"{figures.output_tokens_per_s:.1f} tok/s, TPOT p50 {_ms(figures.tpot_ms_p50)}, "
                     f"occupancy {figures.occupancy:.2f}{accepted}")

    def _load(self, server: Server, level: int, warm_up: bool = False) -> RunFigures:
        """One run of the request stream at ``level`` (warm-up: the stream's first ``level`` requests)."""
        self._check_up()
        stream = request_stream(self.workload, level)
        bodies = completion_bodies(stream.head(level) if warm_up else stream, self.models[server.port])
        results = asyncio.run(run_stream(HOST, server.port, bodies, level, alive=self._check_up))
        return run_figures(results, level, self.profile.study.slo)

    def _result(self, variant: ServerVariant, server: Server) -> ServerResult:
        points = []
        for level in self.levels:
            runs = self.runs[(variant.name, level)]
            figures, counters = [r for r, _ in runs], [c for _, c in runs]
            values = [{**r.to_dict(), "acceptance_rate": c.acceptance_rate, "draft_tokens": c.draft_tokens}
                      for r, c in runs]
            points.append(PointResult(level, len(runs), estimates(figures, counters), values))
        return ServerResult(variant.name, variant.label, server.start_s, points)


def _served_model(server: Server) -> str:
    """The model name the server answers to (its ``/v1/models``: the path the script serves)."""
    return json.loads(server.get("/v1/models"))["data"][0]["id"]


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def _gap(point: PointResult | None, tuned: float | None):  # noqa: ANN202 - Estimate | None
    served = point.figure("output_tokens_per_s") if point is not None else None
    return tuned_gap(served, tuned) if served is not None else None
