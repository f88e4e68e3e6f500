"""An exported script or config built from a profile whose names are hostile runs nothing but the
intended command, and every name arrives exactly as written.

The profiles come the way a user gets them: a JSON profile file (hostile hardware, study, model
names and paths) imported with ``autotune profiles import``, then exported with ``autotune export``.
Each script passes ``bash -n`` and runs with a stub of its engine first on PATH that records its
argv: each name is one argument, literally (``--flag=value`` where it starts with ``-``), and no
sentinel file appears. The TensorRT-LLM YAML (alone and inside the trtllm-bench script) and the JSON
read back with the names intact; every comment stays one line.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import profile_factory as factory
from autotune.cli import cli
from autotune.profiles import transfer
from test_export import run_script
from test_no_password_leak import tiny_tune_args

SENTINEL = "PWNED"  # the file every hostile name that could run something would create
HOSTILE = {
    "command substitution": f"$(touch {SENTINEL})",
    "backticks": f"`touch {SENTINEL}`",
    "variables": "$HOME ${PATH} $0 $@",
    "quotes": "it's a \"quoted\" 'name'",
    "line breaks": f"first line\nYAML\ntouch {SENTINEL}\r\n# not a comment",  # YAML: the here-document's end word
    "separators and spaces": f"a b; touch {SENTINEL} && touch {SENTINEL} | cat > {SENTINEL}",
    "leading dash": "--help",
    "short option": "-rf",
    "html": "</script><script>alert(1)</script><img src=x onerror=alert(1)>",
    "yaml specials": f"key: value # no comment {{a: b}} [c] &anchor *anchor !!python/object/apply:os.system ['touch {SENTINEL}']",
    "yaml document markers": "---\n... %YAML 1.1\n- item",
    "control characters": "\x1b[2J\x1b]0;title\x07\ttab\x0bvt\u2028ls",
    "path traversal": f"../../{SENTINEL}/x",
}
SCRIPTS = {"vllm": "vllm", "sglang": "python", "trtllm-bench": "trtllm-bench"}


def read(path: Path) -> str:
    """The file's text exactly: no newline translation (a name may hold a carriage return)."""
    return path.read_bytes().decode("utf-8")


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def option(args: list[str], flag: str) -> str:
    """The value of ``flag`` in ``args``, exactly once: ``flag value``, or ``flag=value``, the only
    form an argument parser cannot misread when the value starts with ``-``."""
    pairs = [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]
    joined = [a[len(flag) + 1:] for a in args if a.startswith(f"{flag}=")]
    assert len(pairs + joined) == 1, (flag, args)
    assert not [v for v in pairs if v.startswith("-")], f"{flag} {pairs[0]!r} reads as two options"
    return (pairs + joined)[0]


def assert_one_line_comments(text: str) -> None:
    """The header (up to the first line of code) is comments only: no name broke out of one."""
    header = text.split("set -euo pipefail")[0] if text.startswith("#!") else text.split("\nmax_batch_size:")[0]
    lines = header.strip("\n").splitlines()[1 if text.startswith("#!") else 0:]
    assert lines and all(line.startswith("# ") for line in lines), lines
    assert all(c.isprintable() for line in lines for c in line), "a control character reached a comment"


@pytest.mark.parametrize("name", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_names_reach_the_engine_literally_and_run_nothing(name: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    db = f"sqlite:///{tmp_path / 'autotune.db'}"
    profile = factory.hostile_profile(name)
    draft = profile.draft.source
    (tmp_path / "profile.json").write_text(transfer.dumps(profile))
    profile_id = str(json.loads(invoke("profiles", "import", str(tmp_path / "profile.json"), "--json", "--db", db))["id"])

    exported = {fmt: Path(invoke("export", profile_id, "--format", fmt, "--db", db).strip())
                for fmt in ("trtllm", "trtllm-bench", "vllm", "sglang", "json")}
    for path in exported.values():  # the default file name is a slug: always inside ./profiles
        assert path.parent == Path("profiles") and (work / path).is_file(), path

    config = yaml.safe_load(read(work / exported["trtllm"]))
    assert config["speculative_config"]["speculative_model_dir"] == draft
    yaml_text = read(work / exported["trtllm"])
    assert_one_line_comments(yaml_text)
    if name.isprintable():  # the MODEL comment is shell-quoted, ready to paste into trtllm-serve MODEL
        model_line = next(line for line in yaml_text.splitlines() if line.startswith("# MODEL = "))
        assert shlex.split(model_line.removeprefix("# MODEL = ")) == [name]
    document = json.loads(read(work / exported["json"]))["profile"]
    assert (document["target"]["name"], document["target"]["source"], document["draft"]["source"],
            document["study"]["name"], document["hardware"]["name"]) == (name, name, draft, name, name)

    for fmt, program in SCRIPTS.items():
        script = read(work / exported[fmt])
        subprocess.run(["bash", "-n"], input=script, text=True, check=True)
        assert_one_line_comments(script)
        run_dir = tmp_path / fmt
        run_dir.mkdir()
        args, recorded_yaml = run_script(script, run_dir, program, {"DATASET": "d.jsonl"} if fmt == "trtllm-bench" else None)
        if fmt == "vllm":
            assert args[0] == "serve"
            assert (args[1] if not name.startswith("-") else option(args, "--model")) == name
            assert json.loads(option(args, "--speculative-config"))["model"] == draft
        elif fmt == "sglang":
            assert args[:2] == ["-m", "sglang.launch_server"]
            assert option(args, "--model-path") == name and option(args, "--speculative-draft-model-path") == draft
        else:
            assert option(args, "--model") == name and option(args, "--model_path") == name
            assert yaml.safe_load(recorded_yaml) == config
    assert not list(tmp_path.rglob(SENTINEL)), "a hostile name ran a command"


@pytest.mark.parametrize("where", ["target.source", "draft.name", "study.name"])
def test_a_name_no_script_can_carry_is_refused_at_import(where: str, tmp_path: Path) -> None:
    """A NUL (no shell argument, PostgreSQL text or file name holds one) is refused in one line, and
    the database stays without the profile."""
    document = json.loads(transfer.dumps(factory.hostile_profile("plain")))
    part, key = where.split(".")
    document["profile"][part][key] = "model\x00name"
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(document))
    db = f"sqlite:///{tmp_path / 'autotune.db'}"
    result = CliRunner().invoke(cli, ["profiles", "import", str(path), "--db", db])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.output
    assert "NUL" in result.stderr and where in result.stderr
    assert json.loads(invoke("profiles", "list", "--json", "--db", db)) == []


def test_a_hostile_model_folder_reaches_the_engine_literally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model tuned from a folder whose path is hostile (the other way a name gets in): the stored
    path, exported, reaches each engine as one literal argument and runs nothing."""
    folder = tmp_path / f"$(touch {SENTINEL}) `touch {SENTINEL}` it's \"q\"" / f"-rf x\nYAML\n; touch {SENTINEL}"
    folder.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    db = f"sqlite:///{tmp_path / 'autotune.db'}"
    invoke(*tiny_tune_args(folder), "--db", db)
    profile_id = str(json.loads(invoke("profiles", "list", "--json", "--db", db))[0]["id"])
    source = json.loads(invoke("profiles", "show", profile_id, "--json", "--db", db))["target"]["source"]
    assert str(folder) in source
    for fmt, program in SCRIPTS.items():
        script = read(Path(invoke("export", profile_id, "--format", fmt, "--db", db).strip()))
        subprocess.run(["bash", "-n"], input=script, text=True, check=True)
        run_dir = tmp_path / fmt
        run_dir.mkdir()
        args, _ = run_script(script, run_dir, program, {"DATASET": "d.jsonl"} if fmt == "trtllm-bench" else None)
        flag = {"vllm": None, "sglang": "--model-path", "trtllm-bench": "--model_path"}[fmt]
        assert (args[1] if flag is None else option(args, flag)) == source
    assert not list(tmp_path.rglob(SENTINEL)), "a hostile path ran a command"
