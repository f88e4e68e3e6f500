"""The library behind every CLI command: each command parses, calls one function here, prints.

Python users call the same functions::

    from autotune import api
    result = api.probe(quick=True)            # measure this machine and store the profile
    print(result.profile.name, result.probe_id)

Every function returns data (the objects the commands render as tables or JSON) and raises an
:class:`~autotune.errors.AutotuneError` for anything the user can fix. Importing this module loads
neither torch nor Optuna: each function imports what it needs when called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.engines.trtllm.versions import DEFAULT_TRTLLM_VERSION
from autotune.errors import ConfigurationError
from autotune.preflight import DEFAULT_SEQ_LEN
from autotune.profiles.query import CURRENT_HARDWARE
from autotune.store import SchemaStatus, open_database

if TYPE_CHECKING:  # these import torch, Optuna or matplotlib: load them only when called
    from autotune.analysis.mix import MixFigures
    from autotune.engines.protocol import ProtocolOptions
    from autotune.hardware import HardwareProfile
    from autotune.hardware.catalog import AcceleratorSpec
    from autotune.measure import MeasureReport
    from autotune.planning import DeploymentPlan, PlanOptions
    from autotune.preflight import PreflightReport
    from autotune.profiles import BestProfile, DeploymentProfile
    from autotune.profiles.data import HardwareInfo
    from autotune.search import StudySummary, TrialListing, TrialRow, TuneOptions, TuneProgress, TuneResult
    from autotune.validation import ValidationOptions, ValidationResult


@dataclass(frozen=True)
class ProbeResult:
    """A measured hardware profile and where it was stored (ids are None with ``store=False``)."""

    profile: HardwareProfile
    hardware_id: int | None
    probe_id: int | None
    database: str | None

    def to_dict(self) -> dict:
        return {
            **self.profile.to_dict(),
            "hardware_id": self.hardware_id,
            "probe_id": self.probe_id,
            "database": self.database,
        }


def probe(
    db_url: str | None = None,
    *,
    quick: bool = False,
    device: str = "auto",
    store: bool = True,
    progress: Callable[[str], None] | None = None,
) -> ProbeResult:
    """Measure this machine and store the hardware profile.

    The database is opened (and checked) before measuring, so a bad URL fails at once and a
    failed probe writes nothing.
    """
    from autotune.hardware import probe_hardware
    from autotune.store import repository

    if not store:
        return ProbeResult(probe_hardware(quick=quick, device=device, progress=progress), None, None, None)
    with open_database(db_url) as database:
        profile = probe_hardware(quick=quick, device=device, progress=progress)
        with database.session() as session:
            hardware = repository.upsert_hardware(
                session,
                fingerprint=profile.fingerprint,
                name=profile.name,
                device_type=profile.device_type,
                device_count=profile.device_count,
                memory_total_bytes=profile.memory_total_bytes,
                spec=profile.spec,
            )
            record = repository.add_probe(
                session,
                hardware,
                method_version=profile.method_version,
                quick=profile.quick,
                duration_s=profile.duration_s,
                metrics=[metric.to_dict() for metric in profile.metrics],
            )
            return ProbeResult(profile, hardware.id, record.id, database.display_url)


def db_status(db_url: str | None = None) -> SchemaStatus:
    """The database's revision against the newest this autotune ships (nothing is written)."""
    return _on_schema(db_url, "schema_status")


def db_upgrade(db_url: str | None = None, revision: str = "head") -> SchemaStatus:
    """Migrate the database up to ``revision``."""
    return _on_schema(db_url, "upgrade", revision)


def db_downgrade(db_url: str | None, revision: str) -> SchemaStatus:
    """Migrate the database down to ``revision`` ("base" drops every autotune table)."""
    return _on_schema(db_url, "downgrade", revision)


def _on_schema(db_url: str | None, action: str, *args: str) -> SchemaStatus:
    """Run one of autotune.store.migrate's functions on the database, leaving the schema alone otherwise."""
    from autotune.store import migrate

    with open_database(db_url, migrate=False) as database:
        return getattr(migrate, action)(database.engine, *args)


def export_models(out: str | Path, which: str = "both", *, architecture: str = "llama",
                  force: bool = False) -> list[Path]:
    """Write the built-in models (``which``: target, draft or both) as Hugging Face folders under
    ``out`` in the target checkpoint format ``architecture`` (llama or mimo); return the folders."""
    from autotune.engines.embedded.hf_export import export_builtin

    try:
        return export_builtin(Path(out), which, force=force, architecture=architecture)
    except FileExistsError as exc:
        raise ConfigurationError(str(exc)) from exc
    except OSError as exc:  # an unwritable or impossible --out: the user's to fix, not a bug
        raise ConfigurationError(f"cannot write the model folders under {out}: {exc.strerror or exc}; "
                                 "choose a writable folder with --out") from exc


def measure(*, engine: str = "embedded", protocol: ProtocolOptions | None = None,
            progress: Callable[[str], None] | None = None, **configuration: Any) -> MeasureReport:
    """Run one configuration against the baseline with ``engine`` under ``protocol``; the
    configuration's keywords are the fields of :class:`autotune.measure.MeasureRequest` (method,
    depth, concurrency, draft, target, workload, temperature, verify, device, seed)."""
    from autotune.measure import MeasureRequest, measure_configuration  # torch only when measuring

    return measure_configuration(MeasureRequest(**configuration), engine=engine, protocol=protocol, progress=progress)


def tune(options: TuneOptions, progress: Callable[[TuneProgress], None] | None = None) -> TuneResult:
    """Run (or continue) a tuning study and store its trials and recommended profile."""
    from autotune.search import tune as run_study

    return run_study(options, progress)


def studies(db_url: str | None = None) -> list[StudySummary]:
    """Every tuning study stored in the database, newest first."""
    from autotune.search import list_studies

    return list_studies(db_url)


def trials(db_url: str | None, study: str) -> list[TrialRow]:
    """The stored trials of ``study``: screening passes, then confirmation rows."""
    from autotune.search import study_trials

    return study_trials(db_url, study)


def trial_listing(db_url: str | None, study: str) -> TrialListing:
    """The stored trials of ``study`` with its builds and the edges of its answer (``autotune trials``)."""
    from autotune.search import study_listing

    return study_listing(db_url, study)


def list_profiles(db_url: str | None = None, *, hardware: str | None = None, model: str | None = None,
                  method: str | None = None, study: str | None = None) -> list[DeploymentProfile]:
    """Stored deployment profiles, newest first, filtered by hardware, target, method and study."""
    from autotune.profiles import list_profiles as find_profiles

    return find_profiles(db_url, hardware=hardware, model=model, method=method, study=study)


def show_profile(db_url: str | None, profile_id: int) -> DeploymentProfile:
    """One stored deployment profile, with its study's trials."""
    from autotune.profiles import show_profile as load_profile

    return load_profile(db_url, profile_id)


def profile_mix(db_url: str | None, profile_id: int, mix: str | Mapping[str, float]) -> MixFigures:
    """A stored profile's tokens/s, TPOT p50 and speedup predicted for ``mix`` (request shares by
    category: ``"code=0.3,chat=0.7"`` or a mapping), from its acceptance per category
    (:mod:`autotune.analysis.mix` states the math); ConfigurationError for a malformed mix or one
    naming a category the profile did not measure."""
    from autotune.analysis.mix import check_shares, parse_mix
    from autotune.profiles.categories import profile_mix as carry_over

    shares = parse_mix(mix) if isinstance(mix, str) else check_shares(mix)
    return carry_over(show_profile(db_url, profile_id), shares)


def best_profile(db_url: str | None, model: str, *, hardware: str | None = CURRENT_HARDWARE,
                 concurrency: int | None = None, slo_tpot_ms: float | None = None) -> BestProfile:
    """The best stored profile of ``model`` on ``hardware``, optionally at a concurrency and TPOT limit."""
    from autotune.profiles import best_profile as find_best

    return find_best(db_url, model, hardware=hardware, concurrency=concurrency, slo_tpot_ms=slo_tpot_ms)


def import_profile(db_url: str | None, path: str | Path) -> DeploymentProfile:
    """Store a profile exported as JSON and return it with its new id."""
    from autotune.profiles import import_profile as store_profile

    return store_profile(db_url, path)


def export(db_url: str | None, profile_id: int, fmt: str = "trtllm", *, output: str | Path | None = None,
           force: bool = False, trtllm_version: str = DEFAULT_TRTLLM_VERSION) -> Path:
    """Write stored profile ``profile_id`` as a serving config in format ``fmt``; return its path."""
    from autotune.serving import write_export

    return write_export(db_url, profile_id, fmt, output=output, force=force, trtllm_version=trtllm_version)


def validate(db_url: str | None, profile_id: int, options: ValidationOptions | None = None,
             progress: Callable[[str], None] | None = None) -> ValidationResult:
    """Serve stored profile ``profile_id``'s vLLM export as written, next to its best fixed depth and
    no speculation, under vLLM's load generator at each concurrency level; store and return the
    figures with their intervals and the tuned-vs-served gap (docs/validation.md)."""
    from autotune.validation import ValidationOptions as Options, validate as run_validation

    return run_validation(db_url, profile_id, options or Options(), progress)


def profile_validations(db_url: str | None, profile_id: int) -> list[ValidationResult]:
    """The stored validations of profile ``profile_id``, newest first (``autotune profiles show``)."""
    from autotune.validation.runner import load_validations

    return load_validations(db_url, profile_id)


@dataclass(frozen=True)
class ExportText:
    """A stored profile as a serving config: the text :func:`export` writes and the file name it
    would choose."""

    filename: str
    text: str


def export_text(db_url: str | None, profile_id: int, fmt: str = "trtllm", *,
                trtllm_version: str = DEFAULT_TRTLLM_VERSION) -> ExportText:
    """Stored profile ``profile_id`` in format ``fmt``, byte for byte what :func:`export` writes,
    without writing a file (the service sends it)."""
    from autotune.serving import default_export_path, stored_export

    profile, text = stored_export(db_url, profile_id, fmt, trtllm_version)
    return ExportText(default_export_path(profile, fmt).name, text)


@dataclass(frozen=True)
class PlanResult:
    """A what-if plan and the serving config it was exported to (None when not exported)."""

    plan: DeploymentPlan
    export: Path | None

    def to_dict(self) -> dict:
        return {**self.plan.to_dict(), "export": str(self.export) if self.export else None}


def plan(db_url: str | None, options: PlanOptions) -> PlanResult:
    """Predict the best configuration per concurrency on ``options.hardware`` (nothing is measured or
    written to the database) of a tuned target (``model``: its stored acceptance) or of the model a
    config.json describes (``config``, with the acceptance given: ``acceptance`` "a1,a2,...",
    ``acceptance_length`` "L" or "L@depth", or ``acceptance_from`` a tuned target as a proxy) and,
    with ``export_format``, write it as a serving config. ``calibration``: auto, stored or assumed
    (:mod:`autotune.planning.inputs`); ``step_costs``: auto, silicon or roofline, ``engine_version``
    the measured data's (:mod:`autotune.planning.costs`); ``ep``: expert parallelism within ``tp``;
    ``mix``: request shares by category (``"code=0.3,chat=0.7"`` or a mapping), for a tuned target
    whose study's workload carried categories (:mod:`autotune.planning.mix`)."""
    from autotune.analysis.mix import check_shares, parse_mix
    from autotune.planning import plan_deployment, plan_from_config, write_plan_export

    if (options.model is None) == (options.config is None):
        raise ConfigurationError("plan either a tuned target (--model) or a config (--config), one of the two")
    if options.model is not None and (options.draft_config or options.acceptance or options.acceptance_length
                                      or options.acceptance_from):
        raise ConfigurationError("--draft-config and the --acceptance options go with --config; --model uses the "
                                 "acceptance stored for the target")
    mix = options.mix
    shares = None if mix is None else parse_mix(mix) if isinstance(mix, str) else check_shares(mix)
    if shares is not None and options.model is None:
        raise ConfigurationError("a mix needs a study with categories: --mix goes with --model (a target tuned on a "
                                 "workload whose requests carry a category), not with a given acceptance")
    deployment = options.deployment()
    if options.model is not None:
        predicted = plan_deployment(db_url, hardware=options.hardware, model=options.model, scope=options.scope(),
                                    deployment=deployment, mix=shares)
    else:
        predicted = plan_from_config(db_url, hardware=options.hardware, config=options.config,
                                     acceptance=options.given_acceptance(), draft_config=options.draft_config,
                                     scope=options.scope(), deployment=deployment)
    path = (write_plan_export(predicted, options.export_format, options.output, options.force)
            if options.export_format else None)
    return PlanResult(predicted, path)


def report(db_url: str | None, study: str, out_dir: str | Path = "report") -> Path:
    """Draw ``study`` as an HTML page with PNG plots in ``out_dir``; return the page's path."""
    from autotune.report import write_report

    return write_report(db_url, study, out_dir)


def report_html(db_url: str | None, study: str) -> str:
    """The HTML page :func:`report` writes for ``study`` (plots embedded), without writing a file."""
    from autotune.report import report_html as render_report

    return render_report(db_url, study)


@dataclass(frozen=True)
class HardwareListing:
    """The machines a profile or plan can name: those stored (probed or tuned on) and the
    accelerator catalog ``autotune plan`` knows by short name."""

    stored: list[HardwareInfo]
    catalog: dict[str, AcceleratorSpec]

    def to_dict(self) -> dict:
        return {
            "stored": [machine.to_dict() for machine in self.stored],
            "catalog": [{"short_name": name, **spec.to_dict()} for name, spec in self.catalog.items()],
        }


def hardware(db_url: str | None = None) -> HardwareListing:
    """Every stored hardware profile (newest first) and the catalog of accelerators."""
    from autotune.hardware.catalog import ACCELERATORS
    from autotune.profiles.records import hardware_info
    from autotune.store import repository

    with open_database(db_url) as database, database.session() as session:
        stored = [hardware_info(record) for record in repository.list_hardware(session)]
    return HardwareListing(stored, dict(ACCELERATORS))



def preflight(target: str | Path, drafts: Sequence[str | Path] = (), *, engine: str = "trtllm",
              seq_len: int = DEFAULT_SEQ_LEN) -> PreflightReport:
    """Check a target/draft pairing (Hugging Face folders) for ``engine`` before spending GPU time."""
    from autotune.engines.registry import folder_support
    from autotune.preflight import PreflightSpace, preflight as check_pairing

    return check_pairing(target, list(drafts), folder_support(engine), space=PreflightSpace(seq_len=seq_len))
