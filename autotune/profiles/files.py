"""Writing exports and reports: atomically, and never over an existing file unless asked."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from autotune.errors import ConfigurationError, OutputExistsError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path | str, data: str | bytes, *, force: bool = False, executable: bool = False) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``,
    so readers never see half a file; refuse an existing ``path`` unless ``force``.

    The folder is created if missing; ``executable`` sets the execute bits (shell scripts).
    Returns ``path``.
    """
    path = Path(path)
    if path.is_dir():
        raise ConfigurationError(f"{path} is a folder; give a file name to write to")
    if path.exists() and not force:
        raise OutputExistsError(f"{path} exists; pass --force to overwrite it, or choose another file with --output")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as tmp:
                tmp.write(payload)
                tmp.flush()
                os.fsync(tmp.fileno())
            # mkstemp creates 0600; give the mode a new file would get.
            os.chmod(tmp_name, (0o777 if executable else 0o666) & ~_umask())
            os.replace(tmp_name, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
            raise
    except OSError as exc:
        raise ConfigurationError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path
