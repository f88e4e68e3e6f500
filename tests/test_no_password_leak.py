"""No output of any command shows a password given in ``--db``: not stdout, stderr, ``--json``, log
records, nor a file the command writes (exports, the report, a plan's export); and a malformed URL
of any kind is one ``Error:`` line on stderr with exit code 2, never a traceback.

The commands run through click's CliRunner, as in tests/test_cli.py. A real password needs a real
server (SQLite has none): the PostgreSQL tests take the test server's fresh database with a password
added, which its trust authentication ignores. Tracebacks under ``--debug`` are not checked: they are
the user's explicit request for the internals.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from sqlalchemy.engine import make_url

import profile_factory as factory
from autotune.cli import cli
from autotune.engines.embedded.builtin import save_model
from autotune.engines.embedded.network import CausalLM, ModelConfig
from autotune.engines.embedded.tokenizer import ByteTokenizer
from autotune.profiles import transfer
from autotune.store import open_database, performance, results
from autotune.workload import load_workload

SECRET = "SENTINEL"  # in every password below; must never be shown
PASSWORD = f"{SECRET}pw"

# Every command with the arguments it needs to get as far as opening the database.
COMMAND_ARGS = {
    "probe": ("--quick",),
    "db current": (),
    "db upgrade": (),
    "db downgrade": ("base",),
    "tune": ("--trials", "1"),
    "studies": (),
    "trials": ("some-study",),
    "profiles list": (),
    "profiles show": ("1",),
    "profiles best": ("--model", "some-model"),
    "profiles import": ("profile.json",),
    "export": ("1", "--format", "vllm"),
    "plan": ("--hardware", "h200", "--model", "some-model"),
    "report": ("some-study",),
    # The server opens the database before it listens, so a bad URL never binds the port.
    "serve": ("--port", "18321"),
    "worker": ("--once",),
    # The profile is read before anything is checked or started, so a bad URL is the first error.
    "validate": ("1", "--vllm-python", "/no/such/python"),
}
NO_DB_COMMANDS = {"measure", "preflight", "models export-hf"}

MALFORMED_URLS = [
    f"postgresql//postgres:{PASSWORD}@127.0.0.1:5432/test",  # no ':' after the scheme
    f"postgresql:postgres:{PASSWORD}@127.0.0.1:5432/test",  # no '//'
    f"postgresql:/postgres:{PASSWORD}@127.0.0.1/test",  # one '/'
    f" postgresql://postgres:{PASSWORD}@127.0.0.1/test",  # a leading space
    f"postgresql://postgres:{PASSWORD}@127.0.0.1:port/test",  # a port that is no number
    f"postgresql://postgres:{PASSWORD}@127.0.0.1:99999/test",  # a port out of range
    f"postgresql://postgres:{PASSWORD}@127.0.0.1:-1/test",  # a negative port
    f"postgresql://postgres:{PASSWORD}@[::1/test",  # an unclosed IPv6 bracket
    f"mysql://postgres:{PASSWORD}@127.0.0.1/test",  # a database autotune does not support
    f"postgresql+nodriver://postgres:{PASSWORD}@127.0.0.1/test",  # an unknown driver
    f"postgresql://postgres:{SECRET}@pw@127.0.0.1/test",  # a raw '@' in the password
    f"postgresql://postgres:{SECRET}:p/w x@@127.0.0.1:1/test",  # ':', '/', ' ', '@' in the password
    f"postgresql://postgres:{SECRET}%zzpw@127.0.0.1:1/test",  # bad percent-encoding
    f"postgresql://:{PASSWORD}@127.0.0.1:1/test",  # a password without a user
    f"postgresql://postgres@127.0.0.1:1/test?password={PASSWORD}",  # the password as a query value
    f"postgresql://postgres:{PASSWORD}@127.0.0.1:1/test",  # nothing listening
    f"postgresql://postgres:{PASSWORD}@no-such-host.invalid/test",  # a host that does not resolve
    f"sqlite://postgres:{PASSWORD}@/nowhere/x.db",  # SQLite has no user, password or host
    f"postgresql://postgres:{PASSWORD}@127.0.0.1:5432/te\x00st",  # a NUL: libpq would cut the name there
    "sqlite:///autotune\x00.db",  # a NUL in a file name
    f"postgresql://postgres:{PASSWORD}@127.0.0.1:5432/test?no_such_option=1",  # an option libpq does not know
    f"postgresql://postgres:{PASSWORD}/test",  # the "@host" forgotten: the password reads as a port
    f"{PASSWORD}@",  # no scheme at all
]


def db_commands(group: click.Group = cli, prefix: str = "") -> list[str]:
    found = []
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            found += db_commands(command, f"{path} ")
        elif path not in NO_DB_COMMANDS:
            found.append(path)
    return found


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def assert_hidden(result: Result, args: tuple[str, ...]) -> None:
    assert SECRET not in result.stdout + result.stderr, f"autotune {' '.join(args)} showed the password:\n{result.output}"
    assert "Traceback" not in result.output, result.output


def assert_one_line_error(result: Result, args: tuple[str, ...]) -> None:
    assert_hidden(result, args)
    assert result.exit_code == 2, f"autotune {' '.join(args)}: exit {result.exit_code}\n{result.output}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert result.stdout == ""


def test_every_database_command_is_listed() -> None:
    assert sorted(db_commands()) == sorted(COMMAND_ARGS)


@pytest.mark.postgres
def test_an_open_database_shows_no_password(secret_url: str) -> None:
    """What a message or a log line could print of an open database: its repr, its display URL."""
    with open_database(secret_url) as database:
        assert SECRET not in repr(database) + database.display_url + repr(database.engine)


@pytest.mark.parametrize("url", MALFORMED_URLS)
def test_a_malformed_url_is_one_line_without_the_password_in_every_command(url: str, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "profile.json").write_text(transfer.dumps(factory.profile_data()))  # valid: the URL is what fails
    for command, extra in COMMAND_ARGS.items():
        args = (*command.split(), *extra, "--db", url)
        assert_one_line_error(invoke(*args), args)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.json"]  # nothing written, no SQLite file


@pytest.fixture
def secret_url(postgres_url: str) -> str:
    """The test's fresh PostgreSQL database, its URL carrying PASSWORD."""
    return make_url(postgres_url).set(password=PASSWORD).render_as_string(hide_password=False)


def tiny_tune_args(folder: Path) -> tuple[str, ...]:
    """`autotune tune` arguments for one quick baseline trial of a tiny random model saved in ``folder``."""
    target = folder / "target.safetensors"
    save_model(CausalLM(ModelConfig(vocab_size=ByteTokenizer.vocab_size, d_model=32, n_layers=1, n_heads=2, d_ff=64,
                                    max_seq_len=96)), target)
    workload = folder / "workload.jsonl"
    workload.write_text('{"prompt": "def f(x):", "max_tokens": 4}\n')
    return ("tune", "--study", "tiny", "--target", str(target), "--method", "none", "--concurrency", "1", "--trials", "1",
            "--sampler", "grid", "--no-confirm", "--workload", str(workload), "--trial-timeout", "300")


def store_plannable_target(url: str) -> str:
    """A target with an n-gram acceptance profile on the built-in workload, so that `plan` has
    something to predict from (as `autotune tune` would leave it); returns its name."""
    workload = load_workload(None)
    config = {"vocab_size": 259, "d_model": 320, "n_layers": 5, "n_heads": 5, "d_ff": 864, "max_seq_len": 1024, "n_mtp": 0}
    with open_database(url) as database, database.session() as session:
        target = results.upsert_model(session, results.ModelEntry(
            fingerprint="a" * 64, name="plan-target", role="target",
                                      source="builtin:plan-target", num_params=9_300_000, num_mtp_modules=0,
                                      vocab_size=259, config=config))
        performance.save_acceptance(session, performance.AcceptanceKey(target.id, "ngram", workload.sha256),
                                    draft_model_id=None, positions=[{"steps": 100, "accepted": 30, "drafted": 100}],
                                    sources=[1], workload_name=workload.label, max_depth=1)
    return "plan-target"


@pytest.mark.postgres
def test_no_command_shows_the_password(secret_url: str, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture,
                                       caplog: pytest.LogCaptureFixture) -> None:
    """Every command, with and without --json, succeeding and failing, on a database with a password."""
    caplog.set_level(logging.DEBUG)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    ids = factory.populate(secret_url)
    plannable = store_plannable_target(secret_url)
    tune = tiny_tune_args(tmp_path)
    profile = str(ids["h100-old"])
    succeed: list[tuple[str, ...]] = [
        ("db", "upgrade"), ("db", "current"), ("probe", "--quick"), ("studies",), ("trials", "h100-old"),
        ("profiles", "list"), ("profiles", "show", profile), ("profiles", "best", "--model", "tiny-target",
                                                               "--hardware", factory.H100[0]),
        ("plan", "--hardware", "h200", "--model", plannable),
    ]
    succeed += [(*args, "--json") for args in succeed]
    succeed += [("export", profile, "--format", fmt, "-o", f"export-{fmt}") for fmt in
                ("trtllm", "trtllm-bench", "vllm", "sglang", "json")]
    succeed += [("plan", "--hardware", "h200", "--model", plannable, "--export", "vllm", "-o", "plan.sh"),
                ("report", "h100-old", "-o", "report"), tune, (*tune, "--json"),
                ("worker", "--once")]  # procrastinate's connection and logs (caplog at DEBUG) included
    for args in succeed:
        result = invoke(*args, "--db", secret_url)
        assert_hidden(result, args)
        assert result.exit_code == 0, f"autotune {' '.join(args)}: exit {result.exit_code}\n{result.output}"

    document = json.loads((work / "export-json").read_text())
    document["profile"]["study"]["name"] = "imported"
    (work / "renamed.json").write_text(json.dumps(document))
    for args in (("profiles", "import", "renamed.json"), ("profiles", "import", "renamed.json", "--json")):
        assert_hidden(invoke(*args, "--db", secret_url), args)
    fail = [("profiles", "import", "export-json"),  # the study is there already: names the database
            ("profiles", "show", "999"), ("export", "999", "--format", "vllm"), ("report", "no-such-study"),
            ("trials", "no-such-study"), ("plan", "--hardware", "h200", "--model", "no-such-model"),
            ("db", "downgrade", "ffff_unknown")]
    for args in fail:
        assert_one_line_error(invoke(*args, "--db", secret_url), args)
    for args in (("db", "downgrade", "base", "--json"), ("db", "current")):
        result = invoke(*args, "--db", secret_url)
        assert_hidden(result, args)
        assert result.exit_code == 0, result.output

    captured = capfd.readouterr()  # whatever bypassed click: logging handlers, worker processes
    assert SECRET not in captured.out + captured.err
    assert SECRET not in caplog.text
    written = [p for p in work.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"export-vllm", "export-json", "plan.sh", "report.html"}
    assert not [p for p in written if SECRET.encode() in p.read_bytes()]
