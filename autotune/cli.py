"""The ``autotune`` command line: parse, call one function of :mod:`autotune.api`, print.

This is the only module that imports click. Errors the user can act on
(:class:`autotune.errors.AutotuneError`, bad options) are printed as one line on stderr with exit
code 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import click
from click.core import ParameterSource

from autotune import __version__, api, json_shapes, render
from autotune.engines.protocol import (
    DEFAULT_CONFIRM_REPETITIONS,
    DEFAULT_CONFIRM_SECONDS,
    DEFAULT_MAX_REPETITIONS,
    DEFAULT_MAX_SECONDS,
    DEFAULT_MIN_REPETITIONS,
    DEFAULT_PRECISION,
    ProtocolOptions,
)
from autotune.engines.base import METHODS
from autotune.engines.registry import ENGINES, FOLDER_ENGINES
from autotune.engines.trtllm.versions import DEFAULT_TRTLLM_VERSION
from autotune.errors import AutotuneError
from autotune.planning.inputs import DTYPES
from autotune.preflight import DEFAULT_SEQ_LEN
from autotune.profiles.query import CURRENT_HARDWARE
from autotune.serving import FORMATS

DEBUG_KEY = "autotune.debug"
EXIT_USER_ERROR = 2
EXIT_INTERNAL_ERROR = 1
EXIT_INTERRUPTED = 130


class OneLineError(click.ClickException):
    """A user-facing error printed as a single ``Error: ...`` line."""

    exit_code = EXIT_USER_ERROR

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


def _debug_enabled(ctx: click.Context | None) -> bool:
    if os.environ.get("AUTOTUNE_DEBUG"):
        return True
    return bool(ctx and ctx.find_root().meta.get(DEBUG_KEY))


class AutotuneGroup(click.Group):
    """A click group that turns every failure into one line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AutotuneError as exc:
            if _debug_enabled(ctx):
                raise
            raise OneLineError(str(exc)) from exc
        except (click.ClickException, click.exceptions.Exit, click.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            if _debug_enabled(ctx):
                raise
            error = OneLineError(
                f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)"
            )
            error.exit_code = EXIT_INTERNAL_ERROR
            raise error from exc

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        try:
            result = super().main(args, prog_name or "autotune", complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            error = OneLineError(exc.format_message() + hint)
            return self._finish(error, standalone_mode)
        except click.ClickException as exc:
            return self._finish(exc, standalone_mode)
        except (click.Abort, KeyboardInterrupt):
            click.echo("Interrupted.", err=True)
            if standalone_mode:
                sys.exit(EXIT_INTERRUPTED)
            raise
        if standalone_mode:
            sys.exit(result if isinstance(result, int) else 0)
        return result

    @staticmethod
    def _finish(exc: click.ClickException, standalone_mode: bool) -> Any:
        if not standalone_mode:
            raise exc
        if isinstance(exc, OneLineError):
            exc.show()
        else:
            click.echo(f"Error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code if exc.exit_code else EXIT_USER_ERROR)


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.find_root().meta[DEBUG_KEY] = True
    return value


debug_option = click.option(
    "--debug", is_flag=True, expose_value=False, is_eager=True, callback=_set_debug,
    help="Show the full traceback on errors.",
)
db_option = click.option(
    "--db", "db_url", metavar="URL", envvar="AUTOTUNE_DB_URL", show_envvar=True,
    help="Database URL (sqlite:///file.db or postgresql://user@host/db). "
    "Default: an SQLite file in the user's data directory.",
)

# Set once the old name of --concurrency has been pointed out (issue 38): one line per invocation.
RENAMED_KEY = "autotune.renamed_said"


def concurrency_option(old: str, dest: str = "concurrency", **attrs: Any) -> Callable:
    """``--concurrency`` (into ``dest``) with ``old`` (``--batch-size`` or ``--batch-sizes``, the
    names before issue 38) as a hidden alias: the alias works, says so in one line on stderr once
    per invocation, and given together with ``--concurrency`` is a one-line error (exit 2)."""
    legacy = f"legacy_{dest}"

    def decorator(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            value = kwargs.pop(legacy)
            if value is not None:
                ctx = click.get_current_context()
                if ctx.get_parameter_source(dest) not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP):
                    raise OneLineError(f"--concurrency and {old} are the same option (its old name): give one")
                root = ctx.find_root().meta
                if not root.get(RENAMED_KEY):
                    root[RENAMED_KEY] = True
                    click.echo(f"{old} is now --concurrency (the old name still works)", err=True)
                kwargs[dest] = value
            return fn(*args, **kwargs)

        wrapper = click.option(old, legacy, default=None, hidden=True, type=attrs.get("type"))(wrapper)
        return click.option("--concurrency", dest, **attrs)(wrapper)

    return decorator


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
wide_option = click.option("--wide", is_flag=True,
                           help="Every column at full width (by default tables fit the terminal, 80 columns when piped).")


def command(group: click.Group, name: str, *, uses_db: bool = True) -> Callable:
    """Register a subcommand with the options every command shares (--debug, and --db)."""

    def decorator(fn: Callable) -> click.Command:
        fn = debug_option(fn)
        if uses_db:
            fn = db_option(fn)
        return group.command(name)(fn)

    return decorator


def emit(result: Any, as_json: bool, show: Callable[[Any], None]) -> None:
    """Print ``result`` as JSON (its ``to_dict()``) or through the human-readable renderer ``show``."""
    if as_json:
        click.echo(json_shapes.dumps(result.to_dict()))
    else:
        show(result)


@click.group(cls=AutotuneGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autotune")
@debug_option
def cli() -> None:
    """Hardware-aware auto-tuner for speculative decoding of LLMs.

    Measures this machine, runs real speculative decoding (none / MTP / draft model / n-gram)
    and remembers what wins, in an SQL database.

    \b
    Examples:
      autotune probe                 # measure this machine and store its profile
      autotune db current            # where the database stands
    """


@command(cli, "probe")
@click.option("--quick", is_flag=True, help="Faster, rougher measurements (about a second).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="'auto' probes NVIDIA GPUs when present, else the CPU; 'cpu' forces the CPU; 'cuda' requires a GPU.")
@click.option("--no-store", is_flag=True, help="Measure and print, but do not write to the database.")
@json_option
def probe_command(db_url: str | None, quick: bool, device: str, no_store: bool, as_json: bool) -> None:
    """Measure this machine and store its hardware profile.

    On NVIDIA GPUs: NVML facts (memory, clocks, bus width, peak bandwidth) and torch
    micro-benchmarks (copy bandwidth, bf16/fp16 matmul, launch overhead). Without a GPU, the CPU:
    memory bandwidth and fp32 matmul throughput. Measured values are shown next to the
    theoretical peak where it is known.

    \b
    Examples:
      autotune probe
      autotune probe --quick --json
      autotune probe --db postgresql://me@dbhost/autotune
    """
    with render.status_spinner(enabled=not as_json) as progress:
        result = api.probe(db_url, quick=quick, device=device, store=not no_store, progress=progress)
    emit(result, as_json, render.print_probe)


@cli.group("db", cls=AutotuneGroup)
def db_group() -> None:
    """Inspect and migrate the autotune database schema.

    \b
    Examples:
      autotune db current
      autotune db upgrade
      autotune db downgrade base --db sqlite:///old.db
    """


@command(db_group, "current")
@json_option
def db_current_command(db_url: str | None, as_json: bool) -> None:
    """Print the database's schema revision and whether it is the newest.

    \b
    Example:
      autotune db current --json
    """
    emit(api.db_status(db_url), as_json, render.print_schema_status)


@command(db_group, "upgrade")
@click.argument("revision", default="head")
@json_option
def db_upgrade_command(db_url: str | None, revision: str, as_json: bool) -> None:
    """Migrate the database up to REVISION (default: head).

    \b
    Example:
      autotune db upgrade --db postgresql://me@dbhost/autotune
    """
    emit(api.db_upgrade(db_url, revision), as_json, render.print_schema_status)


@command(db_group, "downgrade")
@click.argument("revision")
@json_option
def db_downgrade_command(db_url: str | None, revision: str, as_json: bool) -> None:
    """Migrate the database down to REVISION ('base' removes every autotune table).

    Optuna's tables in the same database are left alone.

    \b
    Example:
      autotune db downgrade base
    """
    emit(api.db_downgrade(db_url, revision), as_json, render.print_schema_status)


@cli.group("models", cls=AutotuneGroup)
def models_group() -> None:
    """Convert the built-in models for other engines (Hugging Face folders for transformers / vLLM).

    \b
    Examples:
      autotune models export-hf --out hf-models
      autotune models export-hf --out hf-models --model draft --force
    """


@command(models_group, "export-hf", uses_db=False)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Folder to write the model folders into.")
@click.option("--model", "which", type=click.Choice(["target", "draft", "both"]), default="both", show_default=True,
              help="Which built-in model to export.")
@click.option("--format", "architecture", type=click.Choice(["llama", "mimo"]), default="llama", show_default=True,
              help="The target's checkpoint format: llama (LlamaForCausalLM, MTP modules apart in mtp/model.safetensors) "
                   "or mimo (MiMoForCausalLM with its MTP modules, which vLLM runs with method mtp). The draft is "
                   "always llama.")
@click.option("--force", is_flag=True, help="Overwrite non-empty model folders.")
def models_export_hf_command(out: str, which: str, architecture: str, force: bool) -> None:
    """Write the built-in models as Hugging Face folders: OUT/autotune-byte-target (with its MTP
    modules: in mtp/model.safetensors as a Llama folder, in model.safetensors with --format mimo) and
    OUT/autotune-byte-draft (Llama).

    \b
    Examples:
      autotune models export-hf --out hf-models
      autotune models export-hf --out hf-models --model target --force
      autotune models export-hf --out hf-mimo --model target --format mimo
    """
    for folder in api.export_models(out, which, architecture=architecture, force=force):
        click.echo(str(folder))


engine_option = click.option(
    "--engine", type=click.Choice(ENGINES), default="embedded", show_default=True,
    help="embedded: our PyTorch engine (CPU or CUDA); trtllm: TensorRT-LLM on an NVIDIA GPU; vllm: vLLM on a GPU or "
         "CPU (the last two on Hugging Face folders; see docs/vllm.md to install vLLM).",
)


def protocol_options(fn: Callable) -> Callable:
    """--precision, --min-repetitions, --max-repetitions, --max-seconds: how hard to measure."""
    options = [
        click.option("--precision", type=float, default=DEFAULT_PRECISION, show_default=True,
                     help="Target relative half-width of the 95 % intervals (0.05 = ±5 %)."),
        click.option("--min-repetitions", type=int, default=DEFAULT_MIN_REPETITIONS, show_default=True,
                     help="Rounds always measured (each round: every configuration once, the baseline included)."),
        click.option("--max-repetitions", type=int, default=DEFAULT_MAX_REPETITIONS, show_default=True,
                     help="Stop after this many kept rounds even if the precision is not reached."),
        click.option("--max-seconds", type=float, default=DEFAULT_MAX_SECONDS, show_default=True,
                     help="Start no new round after this many seconds."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@command(cli, "measure", uses_db=False)
@click.option("--method", type=click.Choice(METHODS), default="draft", show_default=True)
@click.option("--depth", type=int, default=None, help="Draft tokens per step (default 4 for speculative methods, 0 for none).")
@concurrency_option("--batch-size", type=int, default=1, show_default=True,
                    help="Requests kept in flight.")
@click.option("--draft", type=click.Path(), default=None,
              help="Draft model file (default: the built-in draft); a Hugging Face folder with --engine trtllm/vllm.")
@click.option("--target", type=click.Path(), default=None,
              help="Target model file (default: the built-in target); a Hugging Face folder with --engine trtllm/vllm.")
@click.option("--workload", type=click.Path(dir_okay=False), default=None,
              help="A JSONL workload file, or a shipped one: code (the default), prose, chat.")
@click.option("--temperature", type=float, default=None, help="Override the requests' temperature (0 = greedy).")
@click.option("--verify", is_flag=True, help="Also compare the outputs with the baseline's, token for token.")
@click.option("--device", default="cpu", show_default=True, help="torch device of the embedded engine: cpu, cuda, cuda:1 ...")
@click.option("--seed", type=int, default=0, show_default=True)
@protocol_options
@engine_option
@json_option
def measure_command(precision, min_repetitions, max_repetitions, max_seconds, engine, as_json, **request) -> None:
    """Run one configuration and report it (the embedded engine by default, or TensorRT-LLM).

    Real speculative decoding: output tokens/s, TTFT/TPOT percentiles, acceptance (counted),
    peak memory. With no options: the built-in target and draft at depth 4 on the built-in workload.
    The configuration and the baseline (no speculation, same concurrency) run in alternating rounds
    after a warm-up, until every 95 % interval is within --precision (or a cap is hit): each figure
    is a mean with its interval, the speedup a paired ratio with its own.

    \b
    Examples:
      autotune measure
      autotune measure --method mtp --depth 3 --concurrency 4 --verify
      autotune measure --method ngram --depth 4 --workload my.jsonl --json
      autotune measure --engine trtllm --target ./DeepSeek-V3 --method mtp --depth 3 --concurrency 8
      autotune models export-hf --out hf && autotune measure --engine vllm --target hf/autotune-byte-target \
          --draft hf/autotune-byte-draft --method draft --depth 3 --concurrency 2 --json
    """
    protocol = ProtocolOptions(precision, min_repetitions, max_repetitions, max_seconds)
    with render.status_spinner(enabled=not as_json) as progress:
        report = api.measure(engine=engine, protocol=protocol, progress=progress, **request)
    emit(report, as_json, render.print_measure)


@command(cli, "tune")
@click.option("--study", default=None, help="Study name (default: derived from hardware, target, workload); reuse it to resume.")
@click.option("--target", default=None, type=click.Path(),
              help="Target model file (default: built-in); with --engine trtllm/vllm, a Hugging Face model folder.")
@click.option("--draft", multiple=True,
              help="Draft candidate (repeatable; default: the built-in draft); folders with --engine trtllm/vllm.")
@click.option("--method", multiple=True, type=click.Choice(METHODS),
              help="Methods to search (repeatable; default: all the target supports).")
@click.option("--max-depth", type=int, default=8, show_default=True, help="Deepest speculation (draft tokens per step) to try.")
@concurrency_option("--batch-sizes", "concurrencies", default=None,
                    help="Comma-separated concurrency levels: requests kept in flight (default: powers of two that fit).")
# The names of autotune.search.samplers.SAMPLERS, typed here because importing that module loads
# optuna (seconds) on every command; tests/test_cli_choices.py keeps the two equal.
@click.option("--sampler", type=click.Choice(["model", "tpe", "random", "grid"]), default=None,
              help="model (default, every engine): time step costs, calibrate a performance model, then measure only what "
                   "it cannot rule out; tpe/random: Optuna samplers (no timings needed); grid: every configuration once.")
@click.option("--no-explore-beyond", is_flag=True,
              help="Model sampler: measure no depth past --max-depth (by default it predicts two more depths and measures "
                   "there when the prediction says one could win).")
@click.option("--seed", type=int, default=None, help="Seed for a reproducible search.")
@click.option("--trials", type=int, default=None, help="Study-wide number of trials.")
@click.option("--timeout", type=float, default=None,
              help="Wall-clock budget of the whole study in seconds (step timings, screening and confirmation): nothing "
                   "new starts after it, and what the confirmation measured by then is stored.")
@click.option("--trial-timeout", type=float, default=None,
              help="Seconds per engine call (model load or one measurement) before the worker is killed [default: 600; 1800 for trtllm and vllm]")
@click.option("--objective", type=click.Choice(["throughput", "pareto"]), default="throughput", show_default=True,
              help="throughput: most output tokens/s; pareto: also report the throughput/TPOT front.")
@click.option("--slo-tpot-ms", type=float, default=None, help="Limit on time per output token (ms) at --slo-percentile.")
@click.option("--slo-ttft-ms", type=float, default=None, help="Limit on time to first token (ms) at --slo-percentile.")
@click.option("--slo-percentile", type=click.Choice(["50", "90", "99"]), default="90", show_default=True,
              help="Percentile of the requests the SLOs apply to.")
@click.option("--workload", type=click.Path(dir_okay=False), default=None,
              help="A JSONL workload file, or a shipped one: code (the default), prose, chat.")
@click.option("--retry-failed", type=int, default=None,
              help="Measure a configuration whose worker crashed, hung or ran out of memory up to this many more times: "
                   "a baseline right away, any other once nothing untried is left (each retry counts against --trials; "
                   "infeasible and unsupported configurations are never retried; 0: failures are final) [default: 1]")
@click.option("--no-confirm", is_flag=True,
              help="Skip the confirmation phase: figures stay single screening runs, without intervals.")
@click.option("--precision", type=float, default=DEFAULT_PRECISION, show_default=True,
              help="Confirmation: target relative half-width of the 95 % intervals (0.05 = ±5 %).")
@click.option("--max-repetitions", type=int, default=DEFAULT_CONFIRM_REPETITIONS, show_default=True,
              help="Confirmation: at most this many rounds per concurrency.")
@click.option("--confirm-seconds", type=float, default=DEFAULT_CONFIRM_SECONDS, show_default=True,
              help="Confirmation: no new round after this many seconds per concurrency (3 rounds always run; "
                   "twice as long while a speculative leader's interval over none still reaches 1).")
@click.option("--quiet", "-q", is_flag=True,
              help="No progress on stderr (by default a bar on a terminal, one line per phase and trial elsewhere).")
@engine_option
@json_option
def tune_command(db_url, concurrencies, slo_percentile, quiet, as_json, **request) -> None:
    """Search method, depth and concurrency with Optuna; confirm the finalists; store every trial and
    the recommended profile.

    Screening: each trial runs real speculative decoding once in a worker process; the baseline (no
    speculation) is measured first at each concurrency. The default model-guided search first times
    step costs and measures one maximum-depth run per proposer, then predicts every configuration
    and measures only those whose optimistic prediction could beat the best measured at their
    concurrency, two depths past --max-depth included (--no-explore-beyond: none); every trial is stored
    with its prediction (--sampler tpe|random|grid to compare). The summary says when an answer sits
    on the edge of the space (its depth at --max-depth, its concurrency the largest tried) and how to
    rerun wider. Confirmation: at each concurrency, the
    finalists (every configuration whose screening figure, plus its noise, reaches the best) and the
    baseline are re-measured in alternating rounds until their 95 % intervals are within --precision;
    configurations the paired comparison cannot separate are tied, and the simplest of the tied is
    recommended (none, then n-gram, then MTP, then a draft model; then smaller depth, less memory).
    Re-run with the same --study to resume; point several workers at one PostgreSQL --db and --study
    to share a study.

    \b
    Examples:
      autotune tune
      autotune tune --trials 30 --slo-tpot-ms 8 --seed 1
      autotune tune --sampler grid --study every-point
      autotune tune --max-depth 4 --no-explore-beyond
      autotune tune --study team-a --db postgresql://me@dbhost/autotune
      autotune tune --engine trtllm --target ./Llama-3.1-8B --draft ./Llama-3.2-1B --concurrency 1,8,32
      autotune tune --engine vllm --target hf/autotune-byte-target --draft hf/autotune-byte-draft --concurrency 1,2,4
    """
    from autotune.search.request import tune_options
    from autotune.tune_progress import tune_progress

    try:
        # `--concurrency ""` is a typo, not a request for the defaults: it must not start a study.
        sizes = [int(s) for s in concurrencies.split(",")] if concurrencies is not None else None
    except ValueError:
        raise OneLineError(f"--concurrency must be comma-separated integers, got {concurrencies!r}") from None
    # The options by their request names, as POST /v1/tune takes them: one conversion for both.
    options = tune_options({**request, "concurrencies": sizes, "slo_percentile": int(slo_percentile)}, db_url)
    with tune_progress(enabled=not (as_json or quiet)) as progress:
        result = api.tune(options, progress)
    emit(result, as_json, lambda r: render.print_lines(r.summary_lines()))


@command(cli, "studies")
@json_option
@wide_option
def studies_command(db_url, as_json, wide) -> None:
    """List tuning studies stored in the database.

    \b
    Example:
      autotune studies --json
    """
    studies = api.studies(db_url)
    if as_json:
        click.echo(json_shapes.dumps(json_shapes.study_list(studies)))
    else:
        render.print_studies(studies, wide)


@command(cli, "trials")
@click.argument("study")
@json_option
@wide_option
def trials_command(db_url, study, as_json, wide) -> None:
    """List the stored trials of STUDY: screening passes (one run each), then the confirmation rows
    (repeated, paired with the baseline) with n, tokens/s and speedup and their 95 % intervals;
    under the table, the study's builds and whether its answer sits on the edge of the space (--json:
    each trial's "builds" and "edges").

    \b
    Example:
      autotune trials my-study
    """
    listing = api.trial_listing(db_url, study)
    if as_json:
        click.echo(json_shapes.dumps(listing.row_dicts()))
    else:
        render.print_trials(listing.rows, f"Trials of {study}", wide, listing.lines())


@cli.group("profiles", cls=AutotuneGroup)
def profiles_group() -> None:
    """Query stored deployment profiles.

    \b
    Examples:
      autotune profiles list --hardware current
      autotune profiles best --model autotune-byte-target --concurrency 4
    """


@command(profiles_group, "list")
@click.option("--hardware", default=None, help="NAME, FINGERPRINT or 'current'.")
@click.option("--model", default=None)
@click.option("--method", default=None)
@click.option("--study", default=None)
@json_option
@wide_option
def profiles_list_command(db_url, hardware, model, method, study, as_json, wide) -> None:
    """List deployment profiles, newest first.

    \b
    Example:
      autotune profiles list --method mtp --json
    """
    profiles = api.list_profiles(db_url, hardware=hardware, model=model, method=method, study=study)
    if as_json:
        click.echo(json_shapes.dumps(json_shapes.profile_list(profiles)))
    else:
        render.print_profiles(profiles, "Deployment profiles", wide)


@command(profiles_group, "show")
@click.argument("profile_id", type=int)
@click.option("--mix", default=None, metavar="CATEGORY=SHARE,...",
              help="Also predict the figures for this mix of request categories, e.g. code=0.3,chat=0.7 "
                   "(shares sum to 1; needs a study on a workload with categories).")
@json_option
@wide_option
def profiles_show_command(db_url, profile_id, mix, as_json, wide) -> None:
    """Show one deployment profile: tokens/s and speedup with their 95 % intervals and n, whether
    the confirmation phase measured it, the configurations tied with it, the depth to serve at
    each concurrency (0: speculation off), where none won, what a TensorRT-LLM or vLLM
    speculative server runs there instead, with its cost against none or "unmeasured", and the
    newest `autotune validate` of the profile (served figures with intervals, the tuned-vs-served gap).
    On a workload whose requests carry a category: the acceptance length per category with its 95 %
    interval, and with --mix the profile's figures predicted for that mix (tokens/s x the mix's
    acceptance over the measured one; docs/statistics.md §8).

    \b
    Examples:
      autotune profiles show 1
      autotune profiles show 1 --mix code=0.3,chat=0.7
    """
    from autotune.profiles.categories import profile_categories
    from autotune.serving.off_depths import off_state_report

    mixed = api.profile_mix(db_url, profile_id, mix) if mix is not None else None
    profile = api.show_profile(db_url, profile_id)
    off_state = off_state_report(profile)
    validations = api.profile_validations(db_url, profile_id)
    if as_json:
        click.echo(json_shapes.dumps(json_shapes.profile_detail(profile, off_state, validations, mixed)))
        return
    render.print_profile(profile, wide, off_state)
    by_category = profile_categories(profile)
    if by_category:
        render.print_categories(by_category, f"Acceptance per request category, {profile.label()} "
                                             f"c{profile.concurrency} (95 % intervals over the prompts)", wide)
    if mixed is not None:
        render.print_mix(mixed, wide)
    if validations:
        from autotune.validation.table import COLUMNS, OPTIONAL, summary_lines, title, validation_rows

        newest = validations[0]  # the older ones are in --json
        render.print_rows(validation_rows(newest), COLUMNS, title=f"Served: {title(newest)}", optional=OPTIONAL,
                          wide=wide)
        for line in summary_lines(newest):
            click.echo(line)


@command(profiles_group, "best")
@click.option("--model", required=True, help="Target model name or fingerprint.")
@click.option("--hardware", default=CURRENT_HARDWARE, show_default=True, help="NAME, FINGERPRINT or 'current'.")
@concurrency_option("--batch-size", type=int, default=None, help="The best at this concurrency.")
@click.option("--slo-tpot-ms", type=float, default=None)
@json_option
@wide_option
def profiles_best_command(db_url, model, hardware, concurrency, slo_tpot_ms, as_json, wide) -> None:
    """The best stored profile for a model on a machine, optionally at a concurrency and TPOT limit.

    \b
    Example:
      autotune profiles best --model autotune-byte-target --concurrency 2 --slo-tpot-ms 10
    """
    best = api.best_profile(db_url, model, hardware=hardware, concurrency=concurrency, slo_tpot_ms=slo_tpot_ms)
    data = best.to_dict()
    if as_json:
        click.echo(json_shapes.dumps(data))
    else:
        render.print_profiles([best.profile], "Best profile", wide)
        if best.operating_point is not None:
            point = best.operating_point.to_dict()
            render.print_rows([point], [k for k in ("method", "depth", "concurrency", "tokens_per_s", "tpot_ms_p50", "speedup")
                                        if k in point], title="At the requested operating point")


@command(profiles_group, "import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@json_option
def profiles_import_command(db_url, path, as_json) -> None:
    """Import a profile exported with `autotune export ID --format json`.

    \b
    Example:
      autotune profiles import profiles/cpu__target__draft-d4-c8.json
    """
    profile = api.import_profile(db_url, path)
    if as_json:
        click.echo(json_shapes.dumps(profile.summary()))
    else:
        click.echo(f"imported as profile {profile.id} (study {profile.study.name})")


@command(cli, "export")
@click.argument("profile_id", type=int)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="trtllm",
              show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              help="Output file (default: under profiles/; - writes to standard output).")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@click.option("--trtllm-version", default=DEFAULT_TRTLLM_VERSION, show_default=True,
              help="TensorRT-LLM version the trtllm and trtllm-bench formats are written for: 1.0, 1.2 or main "
                   "(decoding_type names, draft_len_schedule and CUDA-graph rules differ).")
def export_command(db_url, profile_id, fmt, output, force, trtllm_version) -> None:
    """Write a profile as a serving config: TensorRT-LLM YAML, trtllm-bench, vLLM, SGLang or JSON.

    \b
    Examples:
      autotune export 1 --format trtllm
      autotune export 1 --format trtllm --trtllm-version main
      autotune export 1 --format vllm -o serve.sh --force
      autotune export 1 --format json -o - | jq .per_concurrency
    """
    if output == "-":
        click.echo(api.export_text(db_url, profile_id, fmt, trtllm_version=trtllm_version).text, nl=False)
        return
    click.echo(str(api.export(db_url, profile_id, fmt, output=output, force=force, trtllm_version=trtllm_version)))


@command(cli, "validate")
@click.argument("profile_id", type=int)
@click.option("--engine", type=click.Choice(["vllm"]), default="vllm", show_default=True,
              help="Serving engine (TensorRT-LLM's validation is scripts/gpu_smoke_trtllm.sh, docs/validation.md).")
@click.option("--concurrency", default=None,
              help="Comma-separated concurrency levels (default: the profile's concurrency levels).")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Rounds: timed runs per server and concurrency level, the servers alternating (each "
                   "figure's interval is over these).")
@click.option("--vllm-python", type=click.Path(dir_okay=False), default=None,
              help="Python of the venv with vLLM (default: the venv of the vllm on PATH).")
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="The first server's port on 127.0.0.1, the others' the ports after it (default: free ones).")
@click.option("--start-timeout", "start_timeout_s", type=float, default=600.0, show_default=True,
              help="Seconds a server may take to answer /health.")
@click.option("--workload", type=click.Path(dir_okay=False), default=None,
              help="The study's workload (a JSONL file, or a shipped name: prose, chat), when it was not the default.")
@click.option("--server-arg", "server_args", multiple=True,
              help="An argument appended to every server's command line (repeatable), "
                   "e.g. --server-arg=--enforce-eager.")
@json_option
def validate_command(db_url, profile_id, concurrency, server_args, as_json, **options) -> None:
    """Serve a profile's vLLM export as written and check its figures under load.

    Starts the exported script (the bytes `autotune export --format vllm` writes) on 127.0.0.1,
    the best single fixed depth and no speculation, each with its memory set for this machine, and
    runs them in --runs alternating rounds; drives each with autotune's load generator on the study's
    request stream at each concurrency level (C requests in flight, figures over the steady window,
    as a study measures). Prints output tok/s, TPOT and TTFT, acceptance (vLLM's /metrics counters)
    and goodput under the study's SLO, each with its 95 % interval over the rounds, the schedule's
    paired ratio to the others, and per concurrency the gap between the served and the tuned tok/s;
    stores it all with the profile (`autotune profiles show`). A server that dies stops it at once,
    saying why; every server is stopped, whatever happens; progress goes to stderr.

    \b
    Examples:
      autotune validate 3 --engine vllm
      autotune validate 3 --concurrency 1,2,4 --runs 5 --json
      autotune validate 3 --concurrency 1 --runs 1 --server-arg=--enforce-eager --vllm-python .venv-vllm/bin/python
    """
    from autotune.validation import ValidationOptions
    from autotune.validation.progress import validation_progress
    from autotune.validation.table import COLUMNS, OPTIONAL, parse_concurrency, summary_lines, title, validation_rows

    validation = ValidationOptions(concurrency=parse_concurrency(concurrency), server_args=tuple(server_args), **options)
    # A status line on a terminal, one line per server start and run on a pipe (stderr: --json's
    # stdout stays the JSON alone).
    with validation_progress() as progress:
        result = api.validate(db_url, profile_id, validation, progress=progress)
    if as_json:
        click.echo(json_shapes.dumps(result.to_dict()))
        return
    render.print_rows(validation_rows(result), COLUMNS, title=title(result), optional=OPTIONAL)
    for line in summary_lines(result):
        click.echo(line)


def _accelerator_names() -> str:
    from autotune.hardware.catalog import accelerator_names

    return ", ".join(accelerator_names())


@command(cli, "plan")
@click.option("--hardware", required=True,
              help=f"A catalog accelerator ({_accelerator_names()}) or a stored hardware profile's name or fingerprint.")
@click.option("--model", default=None, help="Stored target model, by name or fingerprint (tuned once on any machine).")
@click.option("--config", "config", type=click.Path(exists=True), default=None,
              help="Instead of --model: the target's config.json (or its folder); no tuning needed.")
@click.option("--draft-config", type=click.Path(exists=True), default=None,
              help="With --config: a draft model's or EAGLE-3 head's config.json (or folder).")
@click.option("--acceptance", default=None, help="With --config: acceptance rates by draft position, a1,a2,...")
@click.option("--acceptance-length", default=None,
              help="With --config: tokens per target pass L, or L@depth (default depth: max(3, ceil(L))).")
@click.option("--acceptance-from", default=None,
              help="With --config: a tuned target whose stored acceptance stands in (a proxy).")
@click.option("--workload", type=click.Path(dir_okay=False), default=None,
              help="Workload whose stored acceptance to use: a JSONL file or a shipped name (default: code).")
@click.option("--isl", type=int, default=None, help="Prompt tokens per request (--config default 1024).")
@click.option("--osl", type=int, default=None, help="Output tokens per request (--config default 1024).")
@click.option("--tp", type=int, default=1, show_default=True, help="Tensor-parallel GPUs per model replica.")
@click.option("--dtype", type=click.Choice(DTYPES), default=None,
              help="Weights and GEMMs (default: the checkpoint's).")
@click.option("--kv-dtype", type=click.Choice(DTYPES), default=None,
              help="KV cache (default: the checkpoint's).")
@click.option("--engine", type=click.Choice(["trtllm", "vllm", "sglang"]), default="trtllm", show_default=True,
              help="Serving engine whose step overhead to assume.")
@click.option("--calibration", default="auto", show_default=True,
              help="Step overhead from a stored timed cost profile of this GPU and engine: auto (when one is stored), "
                   "stored (required), assumed (the named constants).")
@click.option("--step-costs", default="auto", show_default=True,
              help="What prices a step: silicon (NVIDIA's measured kernels, aiconfigurator-core: the plan extra), "
                   "roofline, or auto (silicon where it has the GPU, engine and model, else the roofline).")
@click.option("--engine-version", default=None,
              help="Engine version of the measured kernel data (default: the data's current one).")
@click.option("--ep", type=int, default=1, show_default=True,
              help="MoE: of the --tp GPUs, how many split the experts (expert parallelism); the rest split each expert.")
@concurrency_option("--batch-sizes", "concurrencies", default=None,
                    help="Comma-separated concurrency levels (default: powers of two 1..256 that fit).")
@click.option("--max-depth", type=int, default=None, help="Deepest speculation to consider (default: the deepest measured).")
@click.option("--export", "export_format", type=click.Choice(FORMATS),
              default=None, help="Also write the recommended plan as a serving config, marked PREDICTED.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Export file (default: under profiles/); needs --export.")
@click.option("--force", is_flag=True, help="Overwrite an existing export file.")
@click.option("--mix", default=None, metavar="CATEGORY=SHARE,...",
              help="With --model: plan for this mix of request categories, e.g. code=0.3,chat=0.7 (needs a study "
                   "on a workload with categories).")
@json_option
def plan_command(db_url, as_json, **options) -> None:
    """Predict the best speculative configuration per concurrency on hardware you do not have.

    Acceptance comes from the profiles `autotune tune` stored for the target on the workload (it does
    not depend on the hardware), or, for a model known by its config.json only, from --acceptance,
    --acceptance-length or --acceptance-from; step costs from NVIDIA's measured kernel data for the
    GPU, engine and version where aiconfigurator-core has it (--step-costs), else from a roofline of
    the device (bandwidth, FLOP/s at the dtype, interconnect, at the shares of the peaks serving
    engines reach), plus the engine's step overhead, fitted to a stored timed cost profile of the same
    GPU and engine when one exists. Every figure is a prediction with a 95 % interval, never a
    measurement.

    \b
    Examples:
      autotune plan --hardware h200 --model autotune-byte-target
      autotune plan --hardware h200 --config Llama-3.1-8B/config.json --acceptance-length 3.2
      autotune plan --hardware h200 --config Llama-3.1-8B --acceptance 0.8,0.6,0.45 --tp 2 --dtype fp8
      autotune plan --hardware b200 --config DeepSeek-V3 --acceptance-length 1.8@1 --tp 8 --dtype fp4
      autotune plan --hardware h200 --config DeepSeek-R1 --acceptance-length 2.7@3 --tp 8 --ep 8 --step-costs silicon
      autotune plan --hardware b200 --model autotune-byte-target --concurrency 1,8,64 --json
      autotune plan --hardware h100-sxm --model autotune-byte-target --export trtllm -o h100.yaml
      autotune plan --hardware h200 --model autotune-byte-target --workload mixed.jsonl --mix code=0.3,chat=0.7
    """
    from autotune.planning import PlanOptions, parse_concurrencies

    if options["output"] is not None and options["export_format"] is None:
        raise OneLineError("--output names the export file: pass --export FORMAT too")
    result = api.plan(db_url, PlanOptions(**{**options, "concurrencies": parse_concurrencies(options["concurrencies"])}))
    if as_json:
        click.echo(json_shapes.dumps(result.to_dict()))
        return
    render.print_plan(result.plan)
    if result.export is not None:
        click.echo(f"wrote {result.export} ({options['export_format']}, marked PREDICTED)")


@command(cli, "report")
@click.argument("study")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), default="report", show_default=True)
def report_command(db_url, study, out_dir) -> None:
    """Draw a study: an HTML page with PNG plots (throughput, speedup, acceptance, Pareto front, verdict).

    \b
    Example:
      autotune report my-study -o report/
    """
    click.echo(str(api.report(db_url, study, out_dir)))


model_root_option = click.option(
    "--model-root", "model_roots", multiple=True, type=click.Path(file_okay=False), metavar="PATH",
    envvar="AUTOTUNE_MODEL_ROOTS", show_envvar=True,
    help="A folder jobs may read model and workload files from (repeatable; the variable separates them with "
         f"'{os.pathsep}'). The built-in models and workload are always allowed.")


@command(cli, "serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Reads need no token: listen beyond this machine only on a trusted network.")
@click.option("--port", type=click.IntRange(1, 65535), default=8321, show_default=True)
@model_root_option
@click.option("--answer-cache-s", type=click.FloatRange(0, 3600), metavar="SECONDS",
              help="Keep each /v1/profiles/best answer this long (its Age header says how old; default 2); "
                   "0 asks the database on every request.")
@click.option("--access-log/--no-access-log", default=False, show_default=True,
              help="A line per request (method, path, status; never headers). Off by default, as in gunicorn: it "
                   "costs about a third of the CPU of a kept /v1/profiles/best answer, and /metrics counts requests "
                   "by route and status either way.")
def serve_command(db_url, host, port, model_roots, answer_cache_s, access_log) -> None:
    """Serve the stored results over HTTP, and queue tunes, until Ctrl-C.

    Profiles, the best profile for a request, exports (the bytes `autotune export` writes),
    studies, trials, reports, hardware and what-if plans, in the shapes --json prints; OpenAPI at
    /docs (its assets served locally: it works offline), Prometheus metrics at /metrics, health at
    /healthz, a page for people at / (jobs with their state, progress and ETA; a study's plots at
    /v1/studies/NAME/plots). Jobs: POST /v1/tune queues a tune, GET /v1/jobs follows it. Writes need `Authorization: Bearer $AUTOTUNE_API_TOKEN`; without that
    variable set the server is read-only. On SQLite the server runs the jobs itself, one at a time;
    on PostgreSQL `autotune worker` processes do. With --model-root a job naming a file elsewhere is
    refused at once (422); the workers check their own roots in any case.

    \b
    Examples:
      autotune serve
      AUTOTUNE_API_TOKEN=$(openssl rand -hex 32) autotune serve --model-root /models
      autotune serve --port 9000 --db postgresql://me@dbhost/autotune
      curl 'http://127.0.0.1:8321/v1/profiles/best?model=autotune-byte-target&concurrency=4'
      curl -o serve.yaml 'http://127.0.0.1:8321/v1/profiles/1/export?format=trtllm'
      curl -H "Authorization: Bearer $AUTOTUNE_API_TOKEN" -H 'Content-Type: application/json' \\
          -d '{"concurrencies": [1, 2], "max_depth": 2}' http://127.0.0.1:8321/v1/tune
    """
    try:  # the service is a layer above api, as this module is: it calls the same api functions
        from autotune.jobs import ModelRoots
        from autotune.service import serve
    except ModuleNotFoundError as exc:  # the web stack is an extra: say which, not a traceback
        raise OneLineError(f"autotune serve needs the serve extra ({exc.name} is missing): "
                           "pip install 'autotune[serve]'") from None
    roots = ModelRoots.of(model_roots)
    serve(db_url, host=host, port=port, model_roots=roots if roots.folders else None, access_log=access_log,
          **({} if answer_cache_s is None else {"answer_cache_s": answer_cache_s}))


@command(cli, "worker")
@model_root_option
@click.option("--once", is_flag=True, help="Run the jobs queued now, then exit (default: wait for more until Ctrl-C).")
@click.option("--concurrency", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Jobs run at once (PostgreSQL); one per GPU is the rule.")
@click.option("--stalled-after", "stalled_after_s", type=click.FloatRange(min=1), default=None,
              help="Seconds without a heartbeat after which another worker's job is taken again and its study "
                   "resumed [default: 30 on PostgreSQL, 60 on SQLite]")
def worker_command(db_url, model_roots, once, concurrency, stalled_after_s) -> None:
    """Take queued tunes (POST /v1/tune) and run them: one worker per GPU host.

    Each job runs `autotune tune` with the options it was queued with, in the study it names
    (job-<id> by default), and writes its progress and log tail into the job, which GET /v1/jobs/ID
    shows; on success the job records the study's profile id. A job naming a file outside the
    --model-root folders fails with one line. On PostgreSQL the queue is procrastinate's: two
    workers never take the same job, and the job of a worker killed mid-way is taken again by
    another once the dead worker's heartbeat is --stalled-after seconds old; its study resumes where
    it stopped. Ctrl-C stops the worker at once: its job is taken again the same way.

    \b
    Examples:
      autotune worker --db postgresql://me@dbhost/autotune --model-root /models
      AUTOTUNE_MODEL_ROOTS=/models:/data/workloads autotune worker --db postgresql://me@dbhost/autotune
      autotune worker --once --db postgresql://me@dbhost/autotune
    """
    from autotune.jobs import ModelRoots, work

    def echo(line: str) -> None:
        click.echo(line, err=True)

    try:
        work(db_url, ModelRoots.of(model_roots), once=once, concurrency=concurrency, stalled_after_s=stalled_after_s,
             echo=echo)
    except KeyboardInterrupt:
        # The job under way runs in a thread that cannot be interrupted; leave it as a killed worker
        # would: its heartbeat stops and another worker takes it again.
        click.echo("Interrupted: a job under way is taken again by the next worker, its study resumed.", err=True)
        os._exit(EXIT_INTERRUPTED)


@command(cli, "preflight", uses_db=False)
@click.option("--target", required=True, type=click.Path(exists=True, file_okay=False), help="Hugging Face model folder.")
@click.option("--draft", "drafts", multiple=True, type=click.Path(exists=True, file_okay=False), help="Draft folder (repeatable).")
@click.option("--engine", type=click.Choice(FOLDER_ENGINES), default="trtllm", show_default=True)
@click.option("--seq-len", type=int, default=DEFAULT_SEQ_LEN, show_default=True,
              help="Tokens per sequence (prompt + output) the context windows and memory must hold.")
@json_option
def preflight_command(target, drafts, engine, seq_len, as_json) -> None:
    """Check a target/draft pairing before spending GPU time: tokenizers, architectures, MTP, engine limits.

    Exits 2 when a check fails.

    \b
    Example:
      autotune preflight --target ./Llama-3.1-8B --draft ./Llama-3.2-1B --json
      autotune preflight --engine vllm --target hf/autotune-byte-target --draft hf/autotune-byte-draft --seq-len 512
    """
    report = api.preflight(target, drafts, engine=engine, seq_len=seq_len)
    if as_json:
        click.echo(json_shapes.dumps(report.to_dict()))
    else:
        render.print_rows([c.to_dict() for c in report.checks], ["status", "name", "subject", "message"], title="Preflight")
    if not report.ok:
        raise OneLineError("preflight found errors (see above)")


def main() -> None:
    """Console-script entry point."""
    cli.main(prog_name="autotune")


if __name__ == "__main__":  # pragma: no cover
    main()
