"""Workloads: the built-in one and user JSONL files."""

import json

import pytest

from autotune.errors import WorkloadError
from autotune.workload import (
    BUILTIN_WORKLOAD_VERSION,
    DEFAULT_MAX_TOKENS,
    Request,
    Workload,
    builtin_workload,
    load_workload,
)

# Pinned content of the built-in workload per version: changing the prompts without bumping
# BUILTIN_WORKLOAD_VERSION would silently make stored measurements incomparable.
BUILTIN_SHA256 = {1: "627eb9d34fba6dcb383290e71c0be8ef0c5b42786807930d92c7134d3202930d"}


def write(tmp_path, text: str):
    path = tmp_path / "w.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


def test_builtin_workload_is_versioned_and_pinned():
    workload = builtin_workload()
    assert workload.version == BUILTIN_WORKLOAD_VERSION
    assert workload.sha256 == BUILTIN_SHA256[BUILTIN_WORKLOAD_VERSION], "built-in prompts changed: bump the version"
    assert len(workload.requests) == 16
    assert all(64 <= r.max_tokens <= 128 and r.temperature == 0 for r in workload.requests)
    assert load_workload(None) == workload
    assert workload.label == f"builtin@v{BUILTIN_WORKLOAD_VERSION}"


def test_loads_a_jsonl_file_with_defaults_and_blank_lines(tmp_path):
    path = write(tmp_path, '{"prompt": "def f(", "max_tokens": 8}\n\n{"prompt": "x", "temperature": 0.7}\n')
    workload = load_workload(path)
    assert workload.name == "w" and workload.version is None
    assert workload.requests == (Request("def f(", 8, 0.0), Request("x", DEFAULT_MAX_TOKENS, 0.7))
    assert load_workload(str(path)) == workload


def test_fingerprint_depends_on_content_only(tmp_path):
    a = Workload("a", [Request("p", 4)])
    assert Workload("b", [Request("p", 4)]).sha256 == a.sha256
    assert Workload("a", [Request("p", 5)]).sha256 != a.sha256
    assert Workload("a", [Request("p", 4, 0.5)]).sha256 != a.sha256
    assert load_workload(write(tmp_path, json.dumps({"prompt": "p", "max_tokens": 4}) + "\n")).sha256 == a.sha256


def test_head_and_max_tokens_cap():
    workload = builtin_workload()
    assert workload.head(3).requests == workload.requests[:3]
    assert all(r.max_tokens <= 10 for r in workload.with_max_tokens(10).requests)
    with pytest.raises(WorkloadError):
        workload.head(0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"prompt": "a"}\n{"prompt": "b", \n', r"w.jsonl:2: invalid JSON"),
        ('{"max_tokens": 4}\n', r"w.jsonl:1: 'prompt' is missing"),
        ('{"prompt": ""}\n', r":1: 'prompt' is missing or not a non-empty string"),
        ('{"prompt": 3}\n', r":1: 'prompt'"),
        ('\n{"prompt": "a", "max_tokens": 0}\n', r"w.jsonl:2: 'max_tokens' must be a positive integer"),
        ('{"prompt": "a", "max_tokens": -3}\n', r"'max_tokens' must be a positive integer"),
        ('{"prompt": "a", "max_tokens": 2.5}\n', r"'max_tokens' must be a positive integer"),
        ('{"prompt": "a", "max_tokens": true}\n', r"'max_tokens' must be a positive integer"),
        ('{"prompt": "a", "temperature": -1}\n', r"'temperature' must be a number >= 0"),
        ('{"prompt": "a", "temperature": "hot"}\n', r"'temperature' must be a number >= 0"),
        ('{"prompt": "a", "max_token": 5}\n', r"unknown key\(s\) max_token"),
        ('["prompt", "a"]\n', r":1: expected a JSON object"),
        ("", r"is empty"),
        ("\n  \n", r"is empty"),
    ],
)
def test_malformed_files_give_workload_errors_with_line_numbers(tmp_path, text, message):
    with pytest.raises(WorkloadError, match=message):
        load_workload(write(tmp_path, text))


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(WorkloadError, match="does not exist"):
        load_workload(tmp_path / "missing.jsonl")
    with pytest.raises(WorkloadError, match="does not exist"):
        load_workload(tmp_path)  # a directory
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(WorkloadError, match="UTF-8"):
        load_workload(binary)


def test_a_workload_needs_requests():
    with pytest.raises(WorkloadError, match="no requests"):
        Workload("empty", [])


@pytest.mark.parametrize(("name", "label", "requests"), [("code", "builtin@v1", 16), ("prose", "prose@v1", 24),
                                                          ("chat", "chat@v1", 24)])
def test_shipped_workloads_load_by_name_with_a_name_and_version(name, label, requests):
    workload = load_workload(name)
    assert workload.label == label and len(workload.requests) == requests
    assert load_workload("code").sha256 == builtin_workload().sha256  # the default is the code workload


def test_a_file_of_a_shipped_name_is_read_as_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prose").write_text('{"prompt": "mine"}\n', encoding="utf-8")
    assert load_workload("prose").requests[0].prompt == "mine"


def test_the_chat_workload_repeats_each_conversation_so_far():
    prompts = [r.prompt for r in load_workload("chat").requests]
    assert all(r.category == "chat" for r in load_workload("chat").requests)
    # Each later turn of a conversation starts with the whole previous turn's prompt.
    assert sum(later.startswith(earlier) for earlier, later in zip(prompts, prompts[1:])) >= 16


def test_categories_are_read_and_count_in_the_fingerprint_only_where_given(tmp_path):
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"prompt": "a"}\n', encoding="utf-8")
    tagged = tmp_path / "tagged.jsonl"
    tagged.write_text('{"prompt": "a", "category": "code"}\n', encoding="utf-8")
    assert load_workload(tagged).requests[0].category == "code"
    assert load_workload(plain).sha256 != load_workload(tagged).sha256
    assert load_workload(plain).sha256 == Workload("x", [Request("a")]).sha256  # unchanged without categories


@pytest.mark.parametrize("category", ["", "Code", "a b", 3, "x" * 33])
def test_a_bad_category_is_refused_naming_the_line(tmp_path, category):
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps({"prompt": "a", "category": category}) + "\n", encoding="utf-8")
    with pytest.raises(WorkloadError, match=r"w.jsonl:1: 'category' must be"):
        load_workload(path)


def test_an_unknown_workload_name_lists_the_shipped_ones():
    with pytest.raises(WorkloadError, match="code, prose, chat"):
        load_workload("poetry")
