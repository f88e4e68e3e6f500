"""The library behind the commands: light to import, one function per command, data back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autotune import api
from autotune.cli import cli
from autotune.errors import ConfigurationError
from autotune.planning import PlanOptions


def test_importing_the_api_loads_no_heavy_package() -> None:
    code = ("import sys, autotune.api; "
            "print(sorted(m for m in ('torch', 'optuna', 'matplotlib', 'vllm', 'tensorrt_llm') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_every_command_has_its_function() -> None:
    names = {"probe": "probe", "db current": "db_status", "db upgrade": "db_upgrade", "db downgrade": "db_downgrade",
             "models export-hf": "export_models", "measure": "measure", "tune": "tune", "studies": "studies",
             "trials": "trials", "profiles list": "list_profiles", "profiles show": "show_profile",
             "profiles best": "best_profile", "profiles import": "import_profile", "export": "export",
             "plan": "plan", "report": "report", "preflight": "preflight", "validate": "validate"}
    commands = {f"{group} {name}" if group else name
                for group, command in [("", cli), *((n, c) for n, c in cli.commands.items() if hasattr(c, "commands"))]
                for name, sub in command.commands.items() if not hasattr(sub, "commands")}
    # `serve` runs autotune.service and `worker` autotune.jobs: layers above api like the CLI, whose
    # routes and jobs call the functions above (a job runs api.tune).
    assert commands == set(names) | {"serve", "worker"}
    assert all(callable(getattr(api, function)) for function in names.values())


def test_an_empty_database_has_no_studies_and_no_profiles(sqlite_url: str) -> None:
    assert api.studies(sqlite_url) == []
    assert api.list_profiles(sqlite_url) == []


def test_a_plan_needs_a_stored_target(sqlite_url: str) -> None:
    with pytest.raises(ConfigurationError, match="unknown target model 'nobody'"):
        api.plan(sqlite_url, PlanOptions(hardware="h200", model="nobody"))


def test_exporting_models_over_a_file_is_a_configuration_error(tmp_path: Path) -> None:
    blocker = tmp_path / "taken"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigurationError, match="cannot write the model folders under"):
        api.export_models(blocker / "models", "draft")
