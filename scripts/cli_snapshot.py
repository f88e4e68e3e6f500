"""Every read-only CLI command's output, and every export, on a stored database: one file each.

Run it on the same database before and after a change and compare the folders: a refactoring that
changes no behaviour leaves them byte-identical.

    python scripts/cli_snapshot.py DB_FILE OUT_DIR      # DB_FILE: an SQLite file holding studies
    diff -r before/ after/

The database is copied first (commands that migrate or write never touch the original). Every
study, every profile, each export format and TensorRT-LLM version, the plans of each stored target
on two catalog accelerators and each command's ``--json`` form are covered; the HTML report is
compared without its PNG plots (matplotlib may differ by version). Each file holds the command, its
exit code, stdout and stderr, with the temporary paths replaced by fixed names.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TRTLLM_VERSIONS = ("1.0", "1.2", "main")
EXPORT_FORMATS = ("trtllm", "trtllm-bench", "vllm", "sglang", "json")
PLAN_HARDWARE = ("h200", "l40s")


def autotune(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True, text=True, env=env,
                          cwd=env["SNAPSHOT_CWD"])


def snapshot(db_file: Path, out_dir: Path) -> int:
    """Write one file per command into ``out_dir``; return how many commands ran."""
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="cli-snapshot-"))
    try:
        db_copy = work / "snapshot.db"
        shutil.copyfile(db_file, db_copy)
        env = {**os.environ, "AUTOTUNE_DB_URL": f"sqlite:///{db_copy}", "COLUMNS": "80", "SNAPSHOT_CWD": str(work),
               "XDG_DATA_HOME": str(work / "xdg")}
        env.pop("AUTOTUNE_DEBUG", None)

        def record(name: str, *args: str) -> subprocess.CompletedProcess:
            result = autotune(*args, env=env)
            text = f"$ autotune {' '.join(args)}\nexit {result.returncode}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
            (out_dir / f"{name}.txt").write_text(text.replace(str(work), "<WORK>"))
            return result

        count = 0
        for fmt in ("", "--json"):
            suffix = "-json" if fmt else ""
            extra = (fmt,) if fmt else ()
            record(f"studies{suffix}", "studies", *extra)
            record(f"profiles-list{suffix}", "profiles", "list", *extra)
            record(f"db-current{suffix}", "db", "current", *extra)
            count += 3
        studies = json.loads(autotune("studies", "--json", env=env).stdout)
        for study in studies:
            name = study["name"]
            record(f"trials-{name}", "trials", name)
            record(f"trials-{name}-json", "trials", name, "--json")
            record(f"trials-{name}-wide", "trials", name, "--wide")
            report_dir = work / f"report-{name}"
            record(f"report-{name}", "report", name, "-o", str(report_dir))
            html = report_dir / "report.html"
            if html.exists():
                (out_dir / f"report-{name}.html").write_text(html.read_text().replace(str(work), "<WORK>"))
            count += 4
        profiles = json.loads(autotune("profiles", "list", "--json", env=env).stdout)
        models = sorted({profile["model"] for profile in profiles})
        for profile in profiles:
            pid = str(profile["id"])
            record(f"profile-{pid}-show", "profiles", "show", pid)
            record(f"profile-{pid}-show-json", "profiles", "show", pid, "--json")
            count += 2
            for fmt in EXPORT_FORMATS:
                versions = TRTLLM_VERSIONS if fmt.startswith("trtllm") else (None,)
                for version in versions:
                    target = work / f"export-{pid}-{fmt}-{version or 'any'}"
                    args = ["export", pid, "--format", fmt, "-o", str(target)]
                    if version:
                        args += ["--trtllm-version", version]
                    record(f"export-{pid}-{fmt}-{version or 'any'}", *args)
                    if target.exists():
                        (out_dir / f"export-{pid}-{fmt}-{version or 'any'}.out").write_text(
                            target.read_text().replace(str(work), "<WORK>"))
                    count += 1
        for model in models:
            record(f"best-{model}", "profiles", "best", "--model", model)
            record(f"best-{model}-json", "profiles", "best", "--model", model, "--json")
            record(f"best-{model}-b1", "profiles", "best", "--model", model, "--concurrency", "1")
            count += 3
            for hardware in PLAN_HARDWARE:
                record(f"plan-{model}-{hardware}", "plan", "--hardware", hardware, "--model", model)
                record(f"plan-{model}-{hardware}-json", "plan", "--hardware", hardware, "--model", model, "--json")
                count += 2
        return count
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: python scripts/cli_snapshot.py DB_FILE OUT_DIR")
    count = snapshot(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
    print(f"{count} commands written to {sys.argv[2]}")


if __name__ == "__main__":
    main()
