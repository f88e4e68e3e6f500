"""Bad input to every command, as a new user types it: each case must end in exactly one line on
stderr (``Error: ...`` saying what is wrong), exit code 2, no traceback, and a database that is
unchanged afterwards.

The table runs on both backends. For each, one database with real content (a quick probe and an
imported deployment profile, with its study and trials) is built once for the module and checked
around every case: the SQLite file must be byte-identical; for PostgreSQL (a database of this
module's own) a digest over every row of every table, in primary-key order, must be equal. Every
case also gets the backend's URL in ``AUTOTUNE_DB_URL``, so a command given no ``--db`` works on the
stored database too, and one that wrote to it would be caught.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, create_engine, inspect, text
from sqlalchemy.engine import make_url

from autotune.cli import cli

EXAMPLE_PROFILE = next((Path(__file__).parents[1] / "profiles").glob("*.json"))
UNWRITABLE = "/proc/autotune-nope"  # /proc refuses new entries, whoever runs the tests

# (command line, fragment of the one error line). Placeholders: {db} the backend's database URL,
# {files} a folder of bad files, {study} the stored study, {profile} the stored profile's id,
# {hardware} the stored hardware's fingerprint.
CASES = [
    # files that do not exist, are not JSON, have the wrong schema, or are folders
    ("measure --workload /no/such.jsonl", "does not exist"),
    ("measure --workload {files}/not-json.jsonl", "invalid JSON"),
    ("measure --workload {files}/wrong-schema.json", "unknown key(s) a"),
    ("measure --workload {files}/prompt-not-text.jsonl", "'prompt' is missing"),
    ("measure --workload {files}", "is a directory"),
    ("measure --target /no/such.safetensors", "does not exist"),
    ("measure --draft {files}/not-json.json", "not a readable safetensors file"),
    ("tune --db {db} --draft {files}/not-json.json", "not a readable safetensors file"),
    ("tune --db {db} --workload {files}/not-json.jsonl", "invalid JSON"),
    ("tune --db {db} --target {files}", "is a folder: the embedded engine takes a .safetensors file"),
    ("profiles import /no/such.json --db {db}", "does not exist"),
    ("profiles import {files}/not-json.json --db {db}", "not valid JSON"),
    ("profiles import {files}/wrong-schema.json --db {db}", "not an autotune profile export"),
    ("profiles import {files}/binary.json --db {db}", "not a UTF-8 text file"),
    ("profiles import {files} --db {db}", "is a directory"),
    ("preflight --target /no/such", "does not exist"),
    ("preflight --target {files}", "has no config.json"),
    ("preflight --target {files}/not-json.json", "is a file"),
    # database URLs
    ("studies --db http://example.com/db", "unsupported database URL"),
    ("studies --db ::not-a-url::", "malformed database URL"),
    ("db current --db sqlite:///{files}/no/such/folder/x.db", "does not exist"),
    ("studies --db sqlite:///{files}", "cannot connect"),
    # numbers: out of range, not numbers, negative, zero
    ("measure --concurrency 0", "concurrency must be an integer >= 1"),
    ("measure --concurrency -3", "concurrency must be an integer >= 1"),
    ("measure --concurrency abc", "is not a valid integer"),
    ("measure --method draft --depth 2 --concurrency 100000", "--concurrency"),
    ("measure --depth 1000", "above the maximum"),
    ("measure --temperature nan", "temperature must be a number >= 0"),
    ("measure --precision 0", "precision must be a fraction"),
    ("measure --max-seconds -5", "max seconds must be a number > 0"),
    ("tune --db {db} --trials 0", "n_trials must be an integer >= 1"),
    ("tune --db {db} --concurrency 1,two", "comma-separated integers"),
    ('tune --db {db} --concurrency ""', "comma-separated integers"),
    ("tune --db {db} --concurrency 1,10000000", "--concurrency 10000000: the target alone needs"),
    ("tune --db {db} --timeout -1", "timeout must be a number of seconds > 0"),
    ("tune --db {db} --slo-tpot-ms -3", "SLO tpot_ms"),
    ("preflight --target {files} --seq-len 0", "seq_len must be an integer >= 1"),
    ("plan --hardware h200 --model autotune-byte-target --concurrency 0 --db {db}", "between 1 and 4096"),
    ("plan --hardware h200 --model autotune-byte-target --max-depth 0 --db {db}", "--max-depth"),
    ("profiles best --model autotune-byte-target --hardware {hardware} --concurrency 0 --db {db}", "concurrency"),
    ("profiles show 99999999999999999999999 --db {db}", "no deployment profile with id"),
    ("export abc --db {db}", "is not a valid integer"),
    # names of things that are not stored or do not exist
    ("trials no-such-study --db {db}", "known studies: {study}"),
    ("report no-such-study --db {db}", "no study 'no-such-study'"),
    ("profiles list --study no-such-study --db {db}", "no study 'no-such-study'"),
    ("profiles list --hardware no-such-machine --db {db}", "no hardware named 'no-such-machine'"),
    ("profiles list --model no-such-model --db {db}", "no target model 'no-such-model'"),
    ("profiles list --method beam --db {db}", "unknown method 'beam'"),
    ("profiles show 999 --db {db}", "newest ids: {profile}"),
    ("export 999 --format json --db {db}", "no deployment profile with id 999"),
    ("plan --hardware tpu-v9 --model autotune-byte-target --db {db}", "unknown hardware 'tpu-v9'"),
    ("plan --hardware h200 --model no-such-model --db {db}", "unknown target model 'no-such-model'"),
    ("measure --method beam", "Invalid value for '--method'"),
    ("measure --engine nope", "Invalid value for '--engine'"),
    ("measure --device tpu", "unknown device 'tpu'"),
    ("db upgrade no-such-revision --db {db}", "cannot migrate to 'no-such-revision'"),
    ("db frobnicate", "No such command"),
    # formats and versions
    ("export {profile} --format yaml --db {db}", "Invalid value for '--format'"),
    ("export {profile} --trtllm-version 9.9 --db {db}", "unknown TensorRT-LLM version '9.9'"),
    ("models export-hf --out {files}/x --format gguf", "Invalid value for '--format'"),
    # output paths: folders for files, files for folders, existing files, unwritable places
    ("export {profile} -o {files} --db {db}", "is a directory"),
    ("export {profile} -o {files}/not-json.json --db {db}", "pass --force to overwrite it"),
    ("export {profile} -o " + UNWRITABLE + "/x.yaml --db {db}", "cannot write"),
    ("report {study} -o {files}/not-json.json --db {db}", "is a file"),
    ("report {study} -o " + UNWRITABLE + " --db {db}", "cannot write"),
    ("models export-hf --out {files}/not-json.json", "is a file"),
    ("models export-hf --out " + UNWRITABLE, "choose a writable folder with --out"),
    ("plan --hardware h200 --model autotune-byte-target -o x.yaml --db {db}", "pass --export FORMAT too"),
]

# Cases about an SQLite file path (a folder that does not exist, a folder given as the file): they
# name their own sqlite:/// URL, so on PostgreSQL they would run the very same command again and
# prove nothing about it. They run on SQLite only.
SQLITE_ONLY = {
    "db current --db sqlite:///{files}/no/such/folder/x.db",
    "studies --db sqlite:///{files}",
}
BACKEND_CASES = [case for case in CASES if case[0] not in SQLITE_ONLY]
# Their PostgreSQL counterpart: a database the server does not have ({missing}: the stored URL with
# another database name).
POSTGRES_ONLY = [
    ("db current --db {missing}", 'database "autotune_no_such_database" does not exist'),
    ("studies --db {missing}", "cannot connect"),
]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rows_digest(engine: Engine) -> str:
    """A digest of every row of every table (with the tables' names and columns) in every schema
    that is not PostgreSQL's own, each table read in primary-key order."""
    digest = hashlib.sha256()
    with engine.connect() as connection:
        inspector = inspect(connection)
        schemas = sorted(name for name in inspector.get_schema_names()
                         if name != "information_schema" and not name.startswith("pg_"))
        for schema in schemas:
            for table in sorted(inspector.get_table_names(schema=schema)):
                columns = [column["name"] for column in inspector.get_columns(table, schema=schema)]
                key = inspector.get_pk_constraint(table, schema=schema)["constrained_columns"] or columns
                order = ", ".join(f'"{name}"' for name in key)
                rows = connection.execute(text(f'SELECT * FROM "{schema}"."{table}" ORDER BY {order}')).all()
                digest.update(repr((schema, table, columns, [tuple(row) for row in rows])).encode())
    return digest.hexdigest()


def run(args: list[str], url: str):  # noqa: ANN201 - click.testing.Result
    return CliRunner().invoke(cli, args, env={"AUTOTUNE_DB_URL": url})


def fill(url: str, root: Path) -> dict[str, str]:
    """Put a probe and an imported profile into the database at ``url``, and bad files into a folder
    under ``root``: the placeholders of :data:`CASES`."""
    probed = run(["probe", "--quick", "--db", url], url)
    assert probed.exit_code == 0, probed.output
    imported = run(["profiles", "import", str(EXAMPLE_PROFILE), "--db", url, "--json"], url)
    assert imported.exit_code == 0, imported.output
    profile = json.loads(imported.output)
    files = root / "files"
    files.mkdir()
    (files / "not-json.jsonl").write_text("not json\n")
    (files / "not-json.json").write_text("garbage\n")
    (files / "wrong-schema.json").write_text('{"a": 1}\n')
    (files / "prompt-not-text.jsonl").write_text('{"prompt": 5}\n')
    (files / "binary.json").write_bytes(bytes(range(256)))
    return {"db": url, "files": str(files), "study": profile["study"], "profile": str(profile["id"]),
            "hardware": profile["hardware_fingerprint"]}


@pytest.fixture(scope="module")
def sqlite_stored(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The filled SQLite database; ``state()`` hashes its file."""
    root = tmp_path_factory.mktemp("bad-inputs-sqlite")
    database = root / "autotune.db"
    return {**fill(f"sqlite:///{database}", root), "state": lambda: sha256(database)}


@pytest.fixture(scope="module")
def postgres_stored(postgres_module_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The filled PostgreSQL database (this module's own); ``state()`` digests its rows."""
    engine = create_engine(postgres_module_url)
    try:
        missing = make_url(postgres_module_url).set(database="autotune_no_such_database")
        yield {**fill(postgres_module_url, tmp_path_factory.mktemp("bad-inputs-postgres")),
               "missing": missing.render_as_string(hide_password=False), "state": lambda: rows_digest(engine)}
    finally:
        engine.dispose()


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def stored(request: pytest.FixtureRequest) -> dict:
    """The filled database of each backend, in turn: the placeholders of :data:`CASES`, and
    ``state()``, what a refused command must leave as it was."""
    return request.getfixturevalue(f"{request.param}_stored")


def refused(stored: dict, line: str, fragment: str) -> None:
    """Run ``line`` against ``stored`` and check that it was refused cleanly, leaving the database alone."""
    before = stored["state"]()
    result = run(shlex.split(line.format(**stored)), stored["db"])
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert fragment.format(**stored) in lines[0]
    assert "Traceback" not in result.output and "internal error" not in lines[0]
    assert stored["state"]() == before, "a refused command changed the database"


def test_there_are_enough_cases_across_every_command() -> None:
    commands = {line.split()[0] for line, _ in CASES}
    assert len(CASES) >= 25
    assert commands >= {"measure", "tune", "studies", "trials", "profiles", "export", "plan", "report", "preflight",
                        "models", "db"}
    assert SQLITE_ONLY <= {line for line, _ in CASES}


@pytest.mark.parametrize(("line", "fragment"), BACKEND_CASES, ids=[line for line, _ in BACKEND_CASES])
def test_bad_input_is_one_line_exit_2_and_leaves_the_database_alone(stored: dict, line: str, fragment: str) -> None:
    refused(stored, line, fragment)


@pytest.mark.parametrize(("line", "fragment"), [case for case in CASES if case[0] in SQLITE_ONLY],
                         ids=[line for line, _ in CASES if line in SQLITE_ONLY])
def test_bad_sqlite_path_is_one_line_exit_2_and_leaves_the_database_alone(sqlite_stored: dict, line: str,
                                                                          fragment: str) -> None:
    refused(sqlite_stored, line, fragment)


@pytest.mark.postgres
@pytest.mark.parametrize(("line", "fragment"), POSTGRES_ONLY, ids=[line for line, _ in POSTGRES_ONLY])
def test_missing_postgres_database_is_one_line_exit_2_and_leaves_the_database_alone(postgres_stored: dict, line: str,
                                                                                     fragment: str) -> None:
    refused(postgres_stored, line, fragment)
