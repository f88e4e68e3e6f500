"""Every CLI command through click's CliRunner: help, --db, --json, one-line errors."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text

from autotune.cli import cli
from autotune.store.tables import VERSION_TABLE

# Commands that run without the profile database (no --db option).
NO_DB_COMMANDS = {"measure", "preflight", "models export-hf"}


def all_commands(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found = []
    for name, command in group.commands.items():
        path = (*prefix, name)
        if isinstance(command, click.Group):
            found += [(path, command)] + all_commands(command, path)
        else:
            found.append((path, command))
    return found


def run(*args: str, **kwargs) -> "click.testing.Result":
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, **kwargs)


@pytest.mark.parametrize("path", [p for p, _ in all_commands()], ids=" ".join)
def test_every_command_has_help_with_an_example(path: tuple[str, ...]) -> None:
    command = dict(all_commands())[path]
    assert command.help and len(command.help.strip()) > 20, f"{' '.join(path)} has no help text"
    result = run(*path, "--help")
    assert result.exit_code == 0
    assert "Example" in result.output, f"autotune {' '.join(path)} --help shows no example"


@pytest.mark.parametrize("path", [p for p, c in all_commands() if not isinstance(c, click.Group)], ids=" ".join)
def test_every_command_takes_db_and_debug(path: tuple[str, ...]) -> None:
    options = {opt for param in dict(all_commands())[path].params for opt in param.opts}
    assert "--debug" in options
    if " ".join(path) not in NO_DB_COMMANDS:
        assert "--db" in options


def test_db_current_upgrade_downgrade(empty_db_url: str) -> None:
    db_url = empty_db_url
    result = run("db", "current", "--db", db_url, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["current"] is None
    assert "at head" in run("db", "upgrade", "--db", db_url).output
    status = json.loads(run("db", "current", "--db", db_url, "--json").output)
    assert status["is_head"] and status["current"] == status["head"]
    result = run("db", "downgrade", "base", "--db", db_url)
    assert result.exit_code == 0 and "empty" in result.output


def test_db_url_from_environment(sqlite_url: str) -> None:
    run("db", "upgrade", env={"AUTOTUNE_DB_URL": sqlite_url})
    assert "at head" in run("db", "current", env={"AUTOTUNE_DB_URL": sqlite_url}).output


def assert_one_line_error(result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert fragment in lines[0]
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("db", "current", "--db", "::not a url::"), "malformed database URL"),
        (("db", "current", "--db", "postgresql://nobody@127.0.0.1:1/x"), "cannot connect"),
        (("db", "downgrade", "nope"), "Can't locate revision"),
        (("db", "frobnicate"), "No such command"),
        (("probe", "--device", "tpu"), "Invalid value"),
        (("--no-such-flag",), "No such option"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: tuple[str, ...], fragment: str) -> None:
    assert_one_line_error(run(*args), fragment)


def test_newer_database_is_refused_and_untouched(sqlite_url: str) -> None:
    run("db", "upgrade", "--db", sqlite_url)
    engine = create_engine(sqlite_url)
    with engine.begin() as connection:
        connection.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = 'ffff_future'"))
    for args in (("db", "upgrade"), ("db", "downgrade", "base"), ("probe", "--quick")):
        assert_one_line_error(run(*args, "--db", sqlite_url), "unknown to this autotune")
    with engine.connect() as connection:
        assert connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar() == "ffff_future"
        assert connection.execute(text("SELECT count(*) FROM autotune_hardware_probes")).scalar() == 0
    engine.dispose()


def test_debug_shows_the_traceback() -> None:
    result = CliRunner().invoke(cli, ["db", "current", "--db", "::bad::", "--debug"])
    assert result.exit_code != 0
    assert result.exc_info is not None and type(result.exception).__name__ == "DatabaseError"


def test_version() -> None:
    assert run("--version").output.startswith("autotune, version")


def count_probes(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.execute(text("SELECT count(*) FROM autotune_hardware_probes")).scalar()
    finally:
        engine.dispose()


def test_probe_prints_a_table_and_stores_a_row(sqlite_url: str) -> None:
    result = run("probe", "--quick", "--db", sqlite_url)
    assert result.exit_code == 0, result.output
    assert "matmul_fp32_gflops" in result.output and "stored as probe 1" in result.output
    assert count_probes(sqlite_url) == 1


def test_probe_json_is_valid_and_stored_under_the_same_fingerprint(sqlite_url: str) -> None:
    first = json.loads(run("probe", "--quick", "--json", "--db", sqlite_url).output)
    second = json.loads(run("probe", "--quick", "--json", "--db", sqlite_url).output)
    assert first["fingerprint"] == second["fingerprint"]
    assert first["hardware_id"] == second["hardware_id"] and second["probe_id"] == first["probe_id"] + 1
    assert {m["name"] for m in first["metrics"]} >= {"memory_bw_gbps", "matmul_fp32_gflops"}


def test_probe_zero_configuration_uses_the_default_database() -> None:
    from autotune.store import default_database_url

    assert run("probe", "--quick").exit_code == 0
    assert count_probes(default_database_url()) == 1


def test_probe_no_store_writes_nothing(sqlite_url: str) -> None:
    run("db", "upgrade", "--db", sqlite_url)
    assert run("probe", "--quick", "--no-store", "--db", sqlite_url).exit_code == 0
    assert count_probes(sqlite_url) == 0


def test_probe_cuda_without_gpu_is_one_line() -> None:
    assert_one_line_error(run("probe", "--device", "cuda", "--no-store"), "GPU")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("measure", "--method", "draft", "--depth", "0"), "depth"),
        (("measure", "--method", "mtp", "--draft", "x.safetensors"), "only used by method draft"),
        (("measure", "--concurrency", "0"), "concurrency"),
        (("measure", "--method", "beam"), "Invalid value"),
        (("tune", "--max-depth", "0"), "depth"),
        (("tune", "--draft", "/no/such/draft.safetensors"), "draft"),
        (("tune", "--concurrency", "1,two"), "comma-separated"),
        (("tune", "--timeout", "0"), "timeout must be a number of seconds > 0"),
        (("tune", "--timeout", "-5"), "timeout must be a number of seconds > 0"),
        (("trials", "no-such-study"), "no-such-study"),
        (("profiles", "show", "999"), "999"),
        (("export", "999", "--format", "json"), "999"),
    ],
)
def test_bad_input_on_tuning_commands_is_one_line(args: tuple[str, ...], fragment: str, sqlite_url: str) -> None:
    db = () if args[0] == "measure" else ("--db", sqlite_url)
    assert_one_line_error(run(*args, *db), fragment)


def test_studies_and_profiles_on_an_empty_database(sqlite_url: str) -> None:
    assert json.loads(run("studies", "--json", "--db", sqlite_url).output) == []
    assert json.loads(run("profiles", "list", "--json", "--db", sqlite_url).output) == []


def test_measure_verify_json() -> None:
    result = run("measure", "--method", "ngram", "--depth", "2", "--verify", "--json",
                 "--workload", str(__import__("pathlib").Path(__file__).parent / "data" / "tiny.jsonl"))
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["outputs_match"] is True and data["measurement"]["drafted_tokens"] >= data["measurement"]["accepted_tokens"]


def test_tune_with_trtllm_missing_fails_at_once_in_one_line(sqlite_url: str) -> None:
    assert_one_line_error(run("tune", "--engine", "trtllm", "--db", sqlite_url), "TensorRT-LLM")


def test_measure_with_trtllm_missing_fails_at_once_in_one_line(tmp_path) -> None:
    assert_one_line_error(run("measure", "--engine", "trtllm", "--target", str(tmp_path)), "pip3 install tensorrt_llm")


@pytest.mark.slow  # a stand-in TensorRT-LLM worker, repeated to the precision
def test_measure_with_trtllm_measures_in_a_worker_and_verifies(fake_trtllm, tmp_path) -> None:
    """The fake TensorRT-LLM decodes deterministically, so greedy MTP output equals the baseline's."""
    import hf_model_factory as hf

    target = hf.write_model(tmp_path / "target", hf.llama_config(architectures=["DeepseekV3ForCausalLM"],
                                                                 num_nextn_predict_layers=1))
    workload = __import__("pathlib").Path(__file__).parent / "data" / "tiny.jsonl"
    result = run("measure", "--engine", "trtllm", "--target", str(target), "--method", "mtp", "--depth", "2",
                 "--concurrency", "2", "--workload", str(workload), "--verify", "--max-repetitions", "3", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["measurement"]["engine"] == "trtllm" and data["measurement"]["drafted_tokens"] > 0
    assert data["outputs_match"] is True


def test_tune_with_trtllm_needs_a_target_folder(fake_trtllm, sqlite_url: str) -> None:
    assert_one_line_error(run("tune", "--engine", "trtllm", "--db", sqlite_url), "needs --target MODEL_FOLDER")


def test_measure_table_has_a_row_per_figure_and_a_column_per_run() -> None:
    workload = __import__("pathlib").Path(__file__).parent / "data" / "tiny.jsonl"
    result = run("measure", "--method", "draft", "--depth", "2", "--verify", "--workload", str(workload),
                 terminal_width=80)
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if "figure" in line)
    assert "draft@2 c1" in header and "none (baseline)" in header
    assert "tokens per target pass" in result.output and "…" not in result.output  # nothing cut at 80 columns
    assert "verify: outputs identical to the baseline, token for token" in result.output


def test_every_flag_the_library_names_in_messages_exists() -> None:
    """Errors and hints tell users which flag to change: each --flag written in the library (outside
    the export formats, whose flags are other programs') must be an option of some command."""
    import pathlib
    import re

    from autotune.cli import cli

    options = {"--help", "--max-concurrency"}  # vllm bench serve's, named where the steady window cites it

    def collect(command: click.Command) -> None:
        options.update(o for p in command.params for o in p.opts if o.startswith("--"))
        for sub in getattr(command, "commands", {}).values():
            collect(sub)

    collect(cli)
    package = pathlib.Path(__file__).resolve().parents[1] / "autotune"
    files = [f for d in ("search", "store", "profiles", "preflight", "perfmodel", "analysis", "hardware", "planning",
                         "report") for f in (package / d).rglob("*.py")]
    files += [package / name for name in ("measure.py", "api.py", "workload.py")]
    unknown = sorted({(flag, f.name) for f in files for flag in re.findall(r"--[a-z][a-z0-9-]+", f.read_text())
                      if flag not in options})
    assert not unknown, f"flags named in messages that no command has: {unknown}"


def tiny_tune(folder, db_url: str, *extra: str, axis: str = "--concurrency") -> "click.testing.Result":
    """`autotune tune` of one baseline trial of a tiny random model saved in ``folder`` (at concurrency
    1, given with the option ``axis``)."""
    from autotune.engines.embedded.builtin import save_model
    from autotune.engines.embedded.network import CausalLM, ModelConfig
    from autotune.engines.embedded.tokenizer import ByteTokenizer

    target = folder / "target.safetensors"
    save_model(CausalLM(ModelConfig(vocab_size=ByteTokenizer.vocab_size, d_model=32, n_layers=1, n_heads=2, d_ff=64,
                                    max_seq_len=96)), target)
    workload = folder / "workload.jsonl"
    workload.write_text('{"prompt": "def f(x):", "max_tokens": 4}\n')
    return run("tune", "--db", db_url, "--target", str(target), "--method", "none", axis, "1",
               "--trials", "1", "--sampler", "grid", "--no-confirm", "--workload", str(workload), *extra)


def test_tune_on_a_pipe_prints_a_plain_line_per_trial_and_quiet_silences_it(tmp_path, sqlite_url: str) -> None:
    """CliRunner's stderr is not a terminal: the progress is plain lines there, not a bar."""
    result = tiny_tune(tmp_path, sqlite_url, "--study", "tiny")
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert any(line.startswith("[0:") and "] trial 1/1 none c1: complete, " in line and " tok/s" in line
               for line in lines), result.stderr
    assert all(line.startswith("[") for line in lines), result.stderr  # nothing but progress lines on stderr
    assert "Measured 1 screening trials" in result.stdout  # the summary stays on stdout

    (tmp_path / "quiet").mkdir()
    # A model of its own, so a study of its own.
    quiet = tiny_tune(tmp_path / "quiet", sqlite_url, "--study", "quiet", "--quiet")
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.output


# Before issue 38 the axis was called batch size: each command's old option, and a value it refuses.
RENAMED_OPTIONS = [
    (("tune",), "--batch-sizes", "1,x"),
    (("plan", "--hardware", "h200", "--model", "m"), "--batch-sizes", "1,x"),
    (("measure",), "--batch-size", "0"),
    (("profiles", "best", "--model", "m", "--hardware", "nowhere"), "--batch-size", "0"),
]


@pytest.mark.parametrize(("command", "old", "value"), RENAMED_OPTIONS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_an_old_option_name_works_and_says_so_once(command: tuple[str, ...], old: str, value: str,
                                                   sqlite_url: str) -> None:
    db = () if command[0] == "measure" else ("--db", sqlite_url)
    result = run(*command, old, value, *db)
    lines = result.stderr.splitlines()
    assert lines[0] == f"{old} is now --concurrency (the old name still works)", result.stderr
    # The value went where --concurrency's goes: refused by the same check, in one more line.
    assert len(lines) == 2 and lines[1].startswith("Error: ") and result.exit_code == 2, result.stderr
    path = command[:2] if command[0] == "profiles" else command[:1]
    assert old not in run(*path, "--help").output  # hidden: --concurrency is the name to learn


@pytest.mark.parametrize(("command", "old", "value"), RENAMED_OPTIONS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_an_old_option_name_next_to_the_new_one_is_an_error(command: tuple[str, ...], old: str, value: str,
                                                            sqlite_url: str) -> None:
    db = () if command[0] == "measure" else ("--db", sqlite_url)
    assert_one_line_error(run(*command, "--concurrency", "1", old, "1", *db),
                          f"--concurrency and {old} are the same option")


def test_tune_takes_the_old_batch_sizes_and_says_so_once(tmp_path, sqlite_url: str) -> None:
    result = tiny_tune(tmp_path, sqlite_url, "--study", "old-name", "--quiet", axis="--batch-sizes")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == ["--batch-sizes is now --concurrency (the old name still works)"]
    trials = json.loads(run("trials", "old-name", "--json", "--db", sqlite_url).stdout)
    assert [(row["method"], row["concurrency"]) for row in trials] == [("none", 1)]
