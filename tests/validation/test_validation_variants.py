"""The three servers' scripts: the schedule is the export byte for byte, the fixed server the same
limits at the best single depth, none the same limits without speculation."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import profile_factory as factory
from autotune.profiles.query import show_profile
from autotune.serving import stored_export
from autotune.serving.speculation import with_draft_config
from autotune.store import open_database
from autotune.store.results import TrialRow
from autotune.validation.variants import FIXED, NONE, SCHEDULE, best_fixed_depth, server_variants


def stored(url: str, tmp_path: Path, concurrencies: tuple[int, ...] = (1, 2)) -> int:
    """A none-vs-draft study on folders named like the exported built-in models."""
    folders = {role: tmp_path / f"autotune-byte-{role}" for role in ("target", "draft")}
    with open_database(url) as database, database.session() as session:
        hardware = factory.hardware(session, *factory.CPU)
        target = factory.model(session, folders["target"].name, "t" * 16, source=str(folders["target"]))
        draft = factory.model(session, folders["draft"].name, "d" * 16, role="draft", source=str(folders["draft"]))
        return factory.study(session, "validate", hardware, target, draft, methods=("none", "draft"),
                             concurrencies=concurrencies).id


def speculative_config(script: str) -> dict | None:
    match = re.search(r"--speculative-config '(.*)'", script)
    return json.loads(match.group(1)) if match else None


def test_the_schedule_server_runs_the_export_as_written(sqlite_url: str, tmp_path: Path) -> None:
    profile_id = stored(sqlite_url, tmp_path)
    profile = with_draft_config(show_profile(sqlite_url, profile_id))
    variants = {v.name: v for v in server_variants(profile)}
    assert list(variants) == [SCHEDULE, FIXED, NONE]
    _, exported = stored_export(sqlite_url, profile_id, "vllm")
    assert variants[SCHEDULE].script == exported
    assert speculative_config(exported)["num_speculative_tokens_per_batch_size"] == [[1, 1, 2], [2, 2, 1]]
    assert variants[SCHEDULE].label == "draft schedule c1:2, c2:1"


def test_the_fixed_server_has_one_depth_and_none_no_drafter(sqlite_url: str, tmp_path: Path) -> None:
    profile = with_draft_config(show_profile(sqlite_url, stored(sqlite_url, tmp_path)))
    variants = {v.name: v for v in server_variants(profile)}
    depth = best_fixed_depth(profile)
    fixed = speculative_config(variants[FIXED].script)
    assert fixed["num_speculative_tokens"] == depth and "num_speculative_tokens_per_batch_size" not in fixed
    assert fixed["model"] == str(tmp_path / "autotune-byte-draft")
    assert variants[FIXED].label == f"draft@{depth}"
    assert speculative_config(variants[NONE].script) is None
    for variant in variants.values():  # the same server limits everywhere: only speculation differs
        assert "--max-num-seqs 2" in variant.script and str(tmp_path / "autotune-byte-target") in variant.script


def test_the_best_fixed_depth_is_fastest_across_concurrencies(sqlite_url: str, tmp_path: Path) -> None:
    profile = show_profile(sqlite_url, stored(sqlite_url, tmp_path, concurrencies=(1, 2, 4, 8)))
    # The factory writes tokens/s = baseline(b) x speedup(draft, d, b): the best depth by geometric mean.
    by_depth = {d: [factory.speedup("draft", d, b) for b in (1, 2, 4, 8)] for d in factory.DEPTHS["draft"]}
    best = max(by_depth, key=lambda d: sum(math.log(s) for s in by_depth[d]))
    assert best_fixed_depth(profile) == best
    # Without rows of its own method (an imported profile without trials), the profile's own depth.
    assert best_fixed_depth(replace(profile, measurements=())) == profile.depth


def test_a_depth_measured_at_one_concurrency_alone_is_not_the_best_fixed_depth(sqlite_url: str, tmp_path: Path) -> None:
    """As in a vLLM study: ngram@4 confirmed at every concurrency, ngram@6 (explored past --max-depth)
    at concurrency 4 only, where it edged out @4; the fixed server must run @4, not @6."""
    profile = show_profile(sqlite_url, stored(sqlite_url, tmp_path, concurrencies=(1, 2, 4, 8)))
    draft = profile.draft.fingerprint

    def row(number: int, depth: int, concurrency: int, tokens_per_s: float) -> TrialRow:
        return TrialRow(phase="confirmation", trial_number=number, method="draft", depth=depth, concurrency=concurrency,
                        state="complete", tokens_per_s=tokens_per_s, draft_fingerprint=draft,
                        extra={"confirmation": {"run": 1, "concurrency": concurrency}})

    rows = [row(0, 4, 1, 242.0), row(1, 4, 2, 417.0), row(2, 4, 4, 637.0), row(3, 6, 4, 653.0), row(4, 4, 8, 670.0)]
    assert best_fixed_depth(replace(profile, measurements=tuple(rows))) == 4


def test_a_profile_of_method_none_serves_none_only(sqlite_url: str, tmp_path: Path) -> None:
    profile = show_profile(sqlite_url, stored(sqlite_url, tmp_path))
    variants = server_variants(replace(profile, method="none", depth=0, draft=None))
    assert [v.name for v in variants] == [NONE]
