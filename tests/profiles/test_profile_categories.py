"""Acceptance per request category through a real tiny study: `profiles show` (text, --json, --mix),
`report`, and `plan --mix`, with their bad inputs (one line, exit 2)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from autotune import api
from autotune.analysis.mix import mix_acceptance
from autotune.cli import cli
from autotune.workload import shipped_workload

MAX_TOKENS = 10


def invoke(*args: str):  # noqa: ANN201 - click.testing.Result
    return CliRunner(env={"COLUMNS": "250"}).invoke(cli, list(args), catch_exceptions=False)


def run(*args: str) -> str:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return result.output


def one_line_error(result, fragment: str) -> None:  # noqa: ANN001
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], result.output
    assert "Traceback" not in result.output


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A tiny real study (built-in models, none and ngram@1 at concurrency 1, screening only) on a
    workload of two code and two chat requests; returns (database URL, workload file)."""
    folder = tmp_path_factory.mktemp("categories")
    workload = folder / "mixed.jsonl"
    code = [{"prompt": r.prompt, "max_tokens": MAX_TOKENS, "category": "code"} for r in shipped_workload("code").requests[:2]]
    chat = [{"prompt": r.prompt, "max_tokens": MAX_TOKENS, "category": "chat"} for r in shipped_workload("chat").requests[:2]]
    workload.write_text("".join(json.dumps(line) + "\n" for line in code + chat))
    url = f"sqlite:///{folder / 'autotune.db'}"
    run("tune", "--db", url, "--method", "none", "--method", "ngram", "--max-depth", "1", "--concurrency", "1",
        "--sampler", "grid", "--no-confirm", "--no-explore-beyond", "--workload", str(workload), "--study", "mixed",
        "--quiet")
    return url, str(workload)


@pytest.mark.slow  # a real tune of two trials: about 10 s
def test_profiles_show_lists_acceptance_per_category_with_intervals(study) -> None:  # noqa: ANN001
    url, _ = study
    output = run("profiles", "show", "1", "--db", url)
    assert "Acceptance per request category" in output
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in output.splitlines() if line.startswith("│") and line.split("│")[1].strip() in ("code", "chat")}
    assert set(rows) == {"code", "chat"}
    assert all(cells[1].startswith("[") for cells in rows.values())  # a 95 % interval over two prompts each
    detail = json.loads(run("profiles", "show", "1", "--db", url, "--json"))
    by_category = {row["category"]: row for row in detail["acceptance_by_category"]}
    assert set(by_category) == {"code", "chat"}
    for row in by_category.values():
        assert row["prompts"] == 2 and row["requests"] >= 2 and row["share"] == 0.5
        assert 1 <= row["low"] <= row["acceptance_length"] <= row["high"]
    assert "mix" not in detail


@pytest.mark.slow
def test_profiles_show_mix_predicts_the_figures_for_the_mix(study) -> None:  # noqa: ANN001
    url, _ = study
    profile = api.show_profile(url, 1)
    stored = profile.chosen_measurement().extra["measurement"]["acceptance_by_category"]
    detail = json.loads(run("profiles", "show", "1", "--db", url, "--json", "--mix", "code=0.3,chat=0.7"))
    mix = detail["mix"]
    factor = mix_acceptance(stored, {"code": 0.3, "chat": 0.7}).value / mix_acceptance(stored, {"code": .5, "chat": .5}).value
    assert mix["factor"] == pytest.approx(factor)
    assert mix["figures"]["tokens_per_s"]["value"] == pytest.approx(profile.tokens_per_s * factor)
    assert mix["figures"]["tpot_ms_p50"]["value"] == pytest.approx(profile.tpot_ms_p50 / factor)
    # Its own mix changes nothing.
    same = api.profile_mix(url, 1, {"code": 0.5, "chat": 0.5})
    assert same.factor == pytest.approx(1.0) and same.figures["tokens_per_s"].value == pytest.approx(profile.tokens_per_s)
    text = run("profiles", "show", "1", "--db", url, "--mix", "code=1")
    assert "PREDICTED for the mix code=1" in text and "factor on tokens/s" in text


@pytest.mark.slow
@pytest.mark.parametrize(("mix", "fragment"), [
    ("prose=1", "measured no category prose; it measured chat, code"),
    ("code=0.5", "shares must sum to 1, they sum to 0.5"),
    ("code=1.2,chat=-0.2", "must be a number >= 0"),
    ("code=lots", "must be a number"),
    ("code:1", "is not category=share"),
])
def test_bad_mixes_are_one_line_exit_2(study, mix, fragment) -> None:  # noqa: ANN001
    url, workload = study
    one_line_error(invoke("profiles", "show", "1", "--db", url, "--mix", mix), fragment)
    one_line_error(invoke("plan", "--db", url, "--hardware", "h200", "--model", "autotune-byte-target",
                          "--workload", workload, "--mix", mix), fragment)


@pytest.mark.slow
def test_plan_takes_the_mix_and_needs_categories_for_it(study, tmp_path) -> None:  # noqa: ANN001
    url, workload = study
    args = ("plan", "--db", url, "--hardware", "h200", "--model", "autotune-byte-target", "--workload", workload,
            "--concurrency", "1", "--json")
    plain = json.loads(run(*args))
    code = json.loads(run(*args, "--mix", "code=1"))
    chat = json.loads(run(*args, "--mix", "chat=1"))
    assert "for the mix code=1" in code["title"]
    assert any(note.startswith("--mix code=1") for note in code["notes"])

    def ngram(plan: dict) -> dict:
        return next(a for a in plan["per_concurrency"][0]["alternatives"] if a["method"] == "ngram")

    def none(plan: dict) -> dict:
        return next(a for a in plan["per_concurrency"][0]["alternatives"] if a["method"] == "none")

    # The n-gram proposer's prediction moves with the mix; none's does not (one token per step).
    assert none(code)["predicted_tokens_per_s"] == pytest.approx(none(plain)["predicted_tokens_per_s"])
    stored = api.show_profile(url, 1)
    rows = [m for m in stored.measurements if m.method == "ngram" and m.complete]
    by_category = rows[0].extra["measurement"]["acceptance_by_category"]
    own = mix_acceptance(by_category, {"code": 0.5, "chat": 0.5}).value
    for plan, mix in ((code, {"code": 1.0}), (chat, {"chat": 1.0})):
        factor = mix_acceptance(by_category, mix).value / own
        assert ngram(plan)["predicted_tokens_per_s"] == pytest.approx(ngram(plain)["predicted_tokens_per_s"] * factor)
    # A given acceptance has no categories to mix.
    one_line_error(invoke("plan", "--db", url, "--hardware", "h200", "--config", str(tmp_path), "--acceptance-length",
                          "2", "--mix", "code=1"), "a mix needs a study with categories")


@pytest.mark.parametrize("mix", ["code=0.5", "code=2,chat=-1", "code=x", "=1", ""])
def test_a_malformed_mix_is_refused_before_anything_is_read(sqlite_url, mix) -> None:  # noqa: ANN001
    one_line_error(invoke("profiles", "show", "1", "--db", sqlite_url, "--mix", mix), "--mix")
    one_line_error(invoke("plan", "--db", sqlite_url, "--hardware", "h200", "--model", "x", "--mix", mix), "--mix")


def test_a_mix_on_a_study_without_categories_says_it_needs_one(sqlite_url, tmp_path) -> None:  # noqa: ANN001
    """The tiny tune of test_cli (a workload without categories): no categories, one line."""
    from test_cli import tiny_tune

    assert tiny_tune(tmp_path, sqlite_url, "--study", "plain", "--quiet").exit_code == 0
    one_line_error(invoke("profiles", "show", "1", "--db", sqlite_url, "--mix", "code=1"),
                   "a mix needs acceptance per category, and profile 1 has none")
    assert "Acceptance per request category" not in run("profiles", "show", "1", "--db", sqlite_url)
    assert json.loads(run("profiles", "show", "1", "--db", sqlite_url, "--json"))["acceptance_by_category"] is None


@pytest.mark.slow
def test_the_report_shows_acceptance_per_category(study, tmp_path) -> None:  # noqa: ANN001
    url, _ = study
    page = api.report_html(url, "mixed")
    assert "Acceptance per request category (ngram@1 c1)" in page or "Acceptance per request category (none c1)" in page
    assert "<td class='text'>chat</td>" in page and "<td class='text'>code</td>" in page
