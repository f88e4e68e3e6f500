"""The wheel carries everything the package needs at run time: migrations, weights, workloads, the
service's page."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "autotune").rglob("__init__.py")
    }
    assert on_disk | {"autotune.migrations"} == listed


@pytest.mark.slow
def test_wheel_ships_migrations_weights_and_workloads(tmp_path: Path) -> None:
    # Build from a copy: setuptools writes build/ next to the sources.
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv*", "build", "*.egg-info", "__pycache__", "*.db"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(source)],
        check=True,
    )
    (wheel,) = tmp_path.glob("autotune-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "autotune/migrations/env.py" in names
    assert "autotune/migrations/script.py.mako" in names
    assert any(n.startswith("autotune/migrations/versions/0001_") for n in names)
    assert "autotune/engines/embedded/weights/target.safetensors" in names
    assert "autotune/engines/embedded/weights/draft.safetensors" in names
    assert "autotune/workloads/default.jsonl" in names
    assert {"autotune/service/page_files/index.html", "autotune/service/page_files/assets/page.js"} <= names
