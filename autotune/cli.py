"""The ``autotune`` command line: parse, call one function of :mod:`autotune.api`, print.

This is the only module that imports click. Errors the user can act on
(:class:`autotune.errors.AutotuneError`, bad options) are printed as one line on stderr with exit
code 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from autotune import __version__, api, render
from autotune.errors import AutotuneError

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
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")


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
        click.echo(json.dumps(result.to_dict(), indent=2, default=str))
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


def main() -> None:
    """Console-script entry point."""
    cli.main(prog_name="autotune")


if __name__ == "__main__":  # pragma: no cover
    main()
