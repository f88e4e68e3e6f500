"""Makes ``study.sqlite`` and ``profile-v2.json`` here with the code of a commit from before issue 38
renamed batch size to concurrency (they were made with main at 7c6dc96, schema 0008), for
tests/store/test_batch_size_era.py: a real study of today's tests' size (tests/search/conftest.py:
tiny random models, three prompts, a made-up CPU profile, TPE, 4 trials, confirmed) and its profile
exported as format 2. Run it from a checkout of such a commit, with this folder's path:

    git worktree add /tmp/old 7c6dc96 && cd /tmp/old
    PYTHONPATH=/tmp/old python /path/to/tests/data/batch_size_era/make_database.py /path/to/tests/data/batch_size_era

The model files are written next to the database (the study's identity holds their fingerprints).
tests/store/test_batch_size_era.py imports this file with today's code for ``STUDY`` and ``options``;
at 7c6dc96 the network module was ``autotune.engines.embedded.model`` (change that one import there).
"""

from __future__ import annotations

import sqlite3
import sys
from dataclasses import replace
from pathlib import Path

import torch

from autotune import api
from autotune.engines.embedded.builtin import save_model
from autotune.engines.embedded.network import CausalLM, ModelConfig
from autotune.engines.embedded.tokenizer import ByteTokenizer
from autotune.hardware import HardwareProfile
from autotune.search import TuneOptions, tune
from autotune.workload import Request, Workload

TARGET = ModelConfig(vocab_size=ByteTokenizer.vocab_size, d_model=32, n_layers=1, n_heads=2, d_ff=64, max_seq_len=96,
                     n_mtp=1)
DRAFT = replace(TARGET, d_model=16, d_ff=32, n_mtp=0)
WORKLOAD = Workload("tiny", [Request("def f(x):", 6), Request("class A:", 6), Request("import os", 4)])
HARDWARE = HardwareProfile("c0ffee0000000000", "test cpu", "cpu", 1, {"ram_total_bytes": 8 << 30}, ())
STUDY = "batch-size-era"


def options(folder: Path, **changes) -> TuneOptions:  # noqa: ANN003
    """The study's options with ``changes`` (the concurrency levels: ``batch_sizes`` in the old code,
    ``concurrencies`` in the new; a larger ``n_trials`` to continue it)."""
    return TuneOptions(**{
        "db_url": f"sqlite:///{folder / 'study.sqlite'}", "study_name": STUDY,
        "target": str(folder / "target.safetensors"), "drafts": (str(folder / "draft.safetensors"),), "max_depth": 2,
        "n_trials": 4, "seed": 3, "sampler": "tpe", "workload": WORKLOAD, "hardware": HARDWARE, "trial_timeout_s": 120,
        "heartbeat_interval_s": 1, "grace_period_s": 2, "max_repetitions": 3, "confirm_seconds": 1.0, **changes,
    })


def main(folder: Path) -> None:
    for name, config, seed in (("target", TARGET, 0), ("draft", DRAFT, 2)):
        torch.manual_seed(seed)
        save_model(CausalLM(config), folder / f"{name}.safetensors")
    (folder / "study.sqlite").unlink(missing_ok=True)
    result = tune(options(folder, batch_sizes=(1, 2)))
    print(result.status, result.trials_this_run)
    db_url = f"sqlite:///{folder / 'study.sqlite'}"
    (profile,) = api.list_profiles(db_url)
    (folder / "profile-v2.json").write_text(api.export_text(db_url, profile.id, "json").text)
    with sqlite3.connect(folder / "study.sqlite") as connection:  # one self-contained, compact file
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("PRAGMA journal_mode=DELETE")
    with sqlite3.connect(folder / "study.sqlite") as connection:
        connection.execute("VACUUM")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
