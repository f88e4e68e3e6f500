"""TensorRT-LLM YAML per version (issue 13, items 4 and 5): EAGLE-3 drafts export as EAGLE-3 to every
engine, and every TensorRT-LLM export passes a strict reader of the version it is written for.

:func:`parse` below encodes, per version, the rules read in NVIDIA/TensorRT-LLM
``tensorrt_llm/llmapi/llm_args.py`` (the copies named at ``autotune.engines.trtllm.versions.TRTLLM_RULES``):

* decoding_type: 1.0 dispatches through a table (MTP, Medusa, Eagle, Lookahead, NGram, DraftTarget,
  UserProvided, AUTO: no Eagle3); 1.2 and main discriminate on the class literals (``Draft_Target``,
  ``Eagle3``, ...). Unknown fields are refused everywhere (``StrictBaseModel``).
* draft_len_schedule: absent in 1.0. 1.2: key 1 required, schedule[1] == max_draft_len, a key holds
  from its concurrency up. main: the smallest key maps to max_draft_len, a key holds up to its batch
  size, above the largest key the draft length is 0; max_concurrency (> 0) and draft_len_schedule are
  mutually exclusive.
* CudaGraphConfig: 1.2 and main: with both given, max_batch_size == max(batch_sizes); 1.0
  (TorchLlmArgs.validate_cuda_graph_config): batch_sizes with a non-zero max_batch_size only when they
  equal the generated list, so an export lists batch_sizes alone.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import profile_factory as factory
from autotune import serving
from autotune.cli import cli
from autotune.engines.trtllm.versions import DEFAULT_TRTLLM_VERSION, trtllm_rules
from autotune.errors import ConfigurationError
from autotune.engines.trtllm.mapping import TRTLLM_OFF_RULE
from autotune.profiles.analysis import serving_schedule
from autotune.serving.off_depths import deployed_schedule
from autotune.serving.speculation import speculative_kind, with_draft_config

VERSIONS = ("1.0", "1.2", "main")

BASE_1_0 = {"max_draft_len", "max_total_draft_tokens", "speculative_model_dir", "max_concurrency", "load_format"}
BASE_1_2 = (BASE_1_0 | {"speculative_model", "draft_len_schedule", "acceptance_window", "acceptance_length_threshold",
                        "allow_advanced_sampling", "decoding_type"})
BASE_MAIN = BASE_1_2 | {"use_rejection_sampling"}
EAGLE = {"eagle_choices", "greedy_sampling", "posterior_threshold", "use_dynamic_tree", "dynamic_tree_max_topK",
         "num_eagle_layers", "max_non_leaves_per_layer", "eagle3_one_model", "eagle3_layers_to_capture"}
CLASS_FIELDS = {
    "MTPDecodingConfig": {"num_nextn_predict_layers", "use_relaxed_acceptance_for_thinking", "relaxed_topk",
                          "relaxed_delta", "use_mtp_vanilla"},
    "NGramDecodingConfig": {"max_matching_ngram_size", "is_keep_all", "is_use_oldest", "is_public_pool"},
    "DraftTargetDecodingConfig": set(),
    "EagleDecodingConfig": EAGLE,
    "Eagle3DecodingConfig": EAGLE,
}
DECODING_TYPES = {
    "1.0": {"MTP": "MTPDecodingConfig", "NGram": "NGramDecodingConfig", "DraftTarget": "DraftTargetDecodingConfig",
            "Eagle": "EagleDecodingConfig"},
    "1.2": {"MTP": "MTPDecodingConfig", "NGram": "NGramDecodingConfig", "Draft_Target": "DraftTargetDecodingConfig",
            "Eagle": "EagleDecodingConfig", "Eagle3": "Eagle3DecodingConfig"},
}
DECODING_TYPES["main"] = DECODING_TYPES["1.2"]
BASE = {"1.0": BASE_1_0, "1.2": BASE_1_2, "main": BASE_MAIN}
TOP_LEVEL = {"max_batch_size", "max_num_tokens", "kv_cache_config", "cuda_graph_config", "speculative_config"}


class Refused(ValueError):
    """What TensorRT-LLM would raise while reading the YAML."""


def parse(config: dict, version: str) -> dict:
    """Read ``config`` as TensorRT-LLM ``version`` would (the rules in the module docstring); returns
    the speculative section or raises :class:`Refused`."""
    if not set(config) <= TOP_LEVEL:
        raise Refused(f"unknown fields {set(config) - TOP_LEVEL}")
    graphs = config["cuda_graph_config"]
    if not set(graphs) <= {"batch_sizes", "max_batch_size", "enable_padding"}:
        raise Refused("unknown CudaGraphConfig field")
    sizes, graph_max = graphs.get("batch_sizes"), graphs.get("max_batch_size", 0)
    if sizes and graph_max:
        if version == "1.0":
            raise Refused("Please don't set both cuda_graph_config.batch_sizes and cuda_graph_config.max_batch_size")
        if graph_max != max(sizes):
            raise Refused("max_batch_size must equal max(batch_sizes)")
    spec = config.get("speculative_config")
    if spec is None:
        return {}
    spec = dict(spec)
    class_name = DECODING_TYPES[version].get(spec.get("decoding_type"))
    if class_name is None:
        raise Refused(f"Invalid decoding type: {spec.get('decoding_type')}")
    allowed = BASE[version] | CLASS_FIELDS[class_name] | {"decoding_type"}
    if not set(spec) <= allowed:
        raise Refused(f"{class_name}: extra fields {set(spec) - allowed}")
    max_draft_len = spec.get("max_draft_len")
    if not isinstance(max_draft_len, int) or max_draft_len < 1:
        raise Refused("max_draft_len must be > 0")
    schedule = spec.get("draft_len_schedule")
    if schedule is not None:
        if any(b < 1 for b in schedule) or any(d < 0 or d > max_draft_len for d in schedule.values()):
            raise Refused("draft_len_schedule: concurrency >= 1, 0 <= draft length <= max_draft_len")
        if version == "1.2":
            if 1 not in schedule:
                raise Refused("draft_len_schedule must include concurrency=1")
            if schedule[1] != max_draft_len:
                raise Refused("draft_len_schedule[1] must equal max_draft_len")
        elif schedule[min(schedule)] != max_draft_len:
            raise Refused("the smallest concurrency key must map to max_draft_len")
    if version == "main":
        if spec.get("max_concurrency") is not None and schedule is not None:
            raise Refused("max_concurrency and draft_len_schedule are mutually exclusive")
        if spec.get("max_concurrency") is not None and spec["max_concurrency"] < 1:
            raise Refused("max_concurrency must be > 0")
    return spec


def runtime_draft_len(spec: dict, version: str, concurrency: int) -> int:
    """The draft length ``version`` uses at ``concurrency`` for the parsed speculative section."""
    if not spec:
        return 0
    schedule = spec.get("draft_len_schedule")
    if schedule is not None:
        if version == "1.2":  # a key holds from its concurrency up
            return schedule[max(b for b in schedule if b <= concurrency)]
        upper = [b for b in schedule if b >= concurrency]  # main: up to its concurrency, 0 above the largest
        return schedule[min(upper)] if upper else 0
    if spec.get("max_concurrency") is not None and concurrency > spec["max_concurrency"]:
        return 0
    return spec["max_draft_len"]


EAGLE3_CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 64}
SCHEDULED = {1: ("mtp", 4), 2: ("mtp", 4), 4: ("mtp", 2), 8: ("none", 0), 16: ("none", 0)}
# MTP measured best up to 4, another method at 8 and 16: the schedule holds depth 2 up to 16 and main
# must not fall to its implicit 0 above the largest key.
GAP = {1: ("mtp", 4), 4: ("mtp", 2), 8: ("ngram", 2), 16: ("ngram", 2)}


def eagle3_profile(per_batch: dict | None = None, draft_source: str = "/models/eagle3-head"):  # noqa: ANN201
    profile = factory.profile_data("draft", 3, 1, per_batch or {1: ("draft", 3), 4: ("draft", 3), 8: ("none", 0)},
                                   draft_source=draft_source)
    return replace(profile, draft=replace(profile.draft, name="eagle3-head", config=EAGLE3_CONFIG))


PROFILES = {
    "mtp-scheduled": factory.profile_data("mtp", 4, 1, SCHEDULED),
    "mtp-gap": factory.profile_data("mtp", 4, 1, GAP),
    "mtp-constant": factory.profile_data("mtp", 3, 2, {1: ("mtp", 3), 2: ("mtp", 3), 4: ("mtp", 3)}),
    "draft": factory.profile_data("draft", 2, 2, {1: ("draft", 2), 2: ("draft", 2), 8: ("none", 0)}),
    "eagle3": eagle3_profile(),
    "eagle3-scheduled": eagle3_profile({1: ("draft", 4), 2: ("draft", 3), 4: ("draft", 2), 16: ("draft", 1)}),
    "ngram": factory.profile_data("ngram", 3, 1, {1: ("ngram", 3), 4: ("ngram", 3)}, details={"max_ngram": 4}),
    "none": factory.profile_data("none", 0, 8, {1: ("mtp", 2), 8: ("none", 0)}),
}


def trtllm(profile, version: str) -> dict:  # noqa: ANN001
    return yaml.safe_load(serving.export_profile(profile, "trtllm", trtllm_version=version))


def intended_depths(profile) -> dict[int, int]:  # noqa: ANN001
    """The draft length the schedule means at every concurrency the profile covers: the measured one,
    between measured ones the smaller concurrency's, 0 from the first concurrency where it is off
    (one-model kinds: never off, floored at 1)."""
    deployed = deployed_schedule(profile, TRTLLM_OFF_RULE)
    if not deployed.depths:  # method none
        return dict.fromkeys(deployed.concurrencies, 0)
    depths, off = {}, False
    for b in sorted({1, *deployed.concurrencies, *deployed.depths}):
        off = off or deployed.depths[max(k for k in deployed.depths if k <= b)] == 0
        depths[b] = 0 if off else deployed.depths[max(k for k in deployed.depths if k <= b)]
    return depths


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_export_is_read_by_its_version(name: str, version: str) -> None:
    config = trtllm(PROFILES[name], version)
    spec = parse(config, version)
    assert not ("max_concurrency" in spec and "draft_len_schedule" in spec)  # never both, in any version
    if version == "1.0":
        assert "draft_len_schedule" not in spec  # the field does not exist there
        assert "max_batch_size" not in config["cuda_graph_config"]
    else:
        graphs = config["cuda_graph_config"]
        assert graphs["max_batch_size"] == max(graphs["batch_sizes"]) == config["max_batch_size"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", sorted(PROFILES))
def test_no_covered_concurrency_falls_to_an_implicit_zero(name: str, version: str) -> None:
    profile = PROFILES[name]
    spec = parse(trtllm(profile, version), version)
    for concurrency, depth in intended_depths(profile).items():
        served = runtime_draft_len(spec, version, concurrency)
        assert (served > 0) == (depth > 0), (concurrency, depth, served)
        if version != "1.0":  # 1.0 has one draft length for every concurrency
            assert served == depth, (concurrency, depth, served)


def test_main_reads_keys_as_upper_bounds_so_the_schedule_reaches_the_largest_concurrency() -> None:
    schedule = serving_schedule(PROFILES["mtp-gap"])
    assert schedule.concurrencies == [1, 4, 8, 16] and schedule.depths == {1: 4, 4: 2}
    spec = trtllm(PROFILES["mtp-gap"], "main")["speculative_config"]
    assert spec["draft_len_schedule"] == {1: 4, 4: 2, 8: 2, 16: 2}
    assert [runtime_draft_len(spec, "main", b) for b in (1, 3, 4, 5, 16, 17)] == [4, 2, 2, 2, 2, 0]
    assert [runtime_draft_len(spec, "1.2", b) for b in (1, 3, 4, 5, 16, 17)] == [4, 4, 2, 2, 2, 2]


def test_a_two_model_schedule_stops_at_the_first_concurrency_without_speculation() -> None:
    scheduled = factory.profile_data("draft", 4, 1, {1: ("draft", 4), 4: ("draft", 2), 8: ("none", 0), 16: ("none", 0)})
    for version in ("1.2", "main"):
        spec = trtllm(scheduled, version)["speculative_config"]
        assert spec["draft_len_schedule"] == {1: 4, 4: 2, 8: 0}
        assert "max_concurrency" not in spec


def test_a_one_model_schedule_never_reaches_zero() -> None:
    for version in ("1.2", "main"):
        spec = trtllm(PROFILES["mtp-scheduled"], version)["speculative_config"]
        assert spec["draft_len_schedule"] == {1: 4, 2: 4, 4: 2, 8: 1, 16: 1}  # floored where none won (PR #16888)
        assert "max_concurrency" not in spec


def test_decoding_type_spellings_per_version() -> None:
    assert trtllm(PROFILES["draft"], "1.0")["speculative_config"]["decoding_type"] == "DraftTarget"
    for version in ("1.2", "main"):
        assert trtllm(PROFILES["draft"], version)["speculative_config"]["decoding_type"] == "Draft_Target"
    assert serving.export_profile(PROFILES["draft"], "trtllm") == serving.export_profile(PROFILES["draft"], "trtllm", "1.2")
    for version in VERSIONS:
        assert trtllm(PROFILES["mtp-scheduled"], version)["speculative_config"]["decoding_type"] == "MTP"
        assert trtllm(PROFILES["ngram"], version)["speculative_config"]["decoding_type"] == "NGram"


def test_version_1_0_has_one_draft_length_and_switches_only_two_model_kinds_off() -> None:
    text = serving.export_profile(PROFILES["mtp-scheduled"], "trtllm", "1.0")
    spec = yaml.safe_load(text)["speculative_config"]
    assert spec == {"decoding_type": "MTP", "max_draft_len": 4, "num_nextn_predict_layers": 4}  # no max_concurrency
    assert any(line.startswith("# Where none won (8, 16), TensorRT-LLM 1.0 serves draft length 4 too, unmeasured "
                               "against none there: one-model MTP / EAGLE-3 never run") for line in text.splitlines())
    assert "draft length 1" not in text
    assert trtllm(PROFILES["draft"], "1.0")["speculative_config"]["max_concurrency"] == 2
    assert "# TensorRT-LLM 1.0 has no draft_len_schedule: draft length 4 (the profile's own)" in text
    assert "# Written for TensorRT-LLM 1.0 (autotune export --trtllm-version: 1.0, 1.2 or main); keys and values" in text


@pytest.mark.parametrize("version", ["1.2", "main"])
def test_eagle3_draft_exports_as_eagle3(version: str) -> None:
    config = trtllm(PROFILES["eagle3"], version)
    sampling = {"allow_advanced_sampling": True} if version == "1.2" else {}  # a deprecated no-op on main
    # One-model EAGLE-3 is never switched off: depth 1 where none won (8), not max_concurrency.
    assert config["speculative_config"] == {"decoding_type": "Eagle3", "max_draft_len": 3,
                                            "speculative_model_dir": "/models/eagle3-head", "eagle3_one_model": True,
                                            "draft_len_schedule": {1: 3, 4: 3, 8: 1}, **sampling}


def test_eagle3_draft_in_1_0_is_eagle_with_the_one_model_flag() -> None:
    text = serving.export_profile(PROFILES["eagle3"], "trtllm", "1.0")
    spec = yaml.safe_load(text)["speculative_config"]
    assert spec["decoding_type"] == "Eagle" and spec["eagle3_one_model"] is True
    assert "TensorRT-LLM 1.0 has no Eagle3 decoding type" in text


def test_eagle3_draft_exports_to_vllm_and_sglang(tmp_path: Path) -> None:
    vllm = serving.export_profile(PROFILES["eagle3"], "vllm")
    words = shlex.split(vllm.replace("\\\n", " ").split("exec ", 1)[1])
    spec = json.loads(words[words.index("--speculative-config") + 1])
    assert spec["method"] == "eagle3" and spec["model"] == "/models/eagle3-head"
    sglang = shlex.split(serving.export_profile(PROFILES["eagle3"], "sglang").replace("\\\n", " ").split("exec ", 1)[1])
    assert sglang[sglang.index("--speculative-algorithm") + 1] == "EAGLE3"
    assert sglang[sglang.index("--speculative-draft-model-path") + 1] == "/models/eagle3-head"
    assert sglang[sglang.index("--speculative-num-draft-tokens") + 1] == "4"
    assert "STANDALONE" not in " ".join(sglang)
    bench = serving.export_profile(PROFILES["eagle3"], "trtllm-bench", "main")
    assert "decoding_type: Eagle3" in bench and "written for TensorRT-LLM main" in bench


def test_a_whole_draft_model_still_exports_as_draft_target() -> None:
    assert speculative_kind(PROFILES["draft"]) == "draft_target"
    assert "draft_model" in serving.export_profile(PROFILES["draft"], "vllm")
    assert "STANDALONE" in serving.export_profile(PROFILES["draft"], "sglang")


def test_an_eagle_1_2_head_is_refused_where_the_engine_cannot_run_it() -> None:
    profile = replace(PROFILES["eagle3"], draft=replace(PROFILES["eagle3"].draft, config={"architectures": ["EagleLlamaForCausalLM"]}))
    for fmt in ("trtllm", "vllm"):
        with pytest.raises(ConfigurationError, match="is an EAGLE-1/2 head"):
            serving.export_profile(profile, fmt)


def test_draft_kind_comes_from_the_folder_when_readable_else_from_the_database(tmp_path: Path) -> None:
    folder = tmp_path / "head"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(EAGLE3_CONFIG))
    stored_as_model = replace(PROFILES["draft"], draft=replace(PROFILES["draft"].draft, source=str(folder)))
    assert speculative_kind(stored_as_model) == "draft_target"  # nothing stored
    assert speculative_kind(with_draft_config(stored_as_model)) == "eagle3"  # the folder says
    gone = replace(PROFILES["eagle3"], draft=replace(PROFILES["eagle3"].draft, source=str(tmp_path / "gone")))
    assert with_draft_config(gone) is gone and speculative_kind(gone) == "eagle3"  # the database says


def test_write_export_reads_the_draft_folder(sqlite_url: str, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    profile_id = factory.populate(sqlite_url)["h100-old"]
    folder = tmp_path / "head"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(EAGLE3_CONFIG))
    from autotune.profiles import show_profile

    stored = show_profile(sqlite_url, profile_id, with_measurements=True)
    draft = factory.profile_data("draft", 2, 2, {2: ("draft", 2)}, draft_source=str(folder)).draft
    monkeypatch.setattr(serving, "show_profile", lambda *a, **k: replace(stored, method="draft", depth=2, draft=draft))
    path = serving.write_export(sqlite_url, profile_id, "trtllm", output=tmp_path / "p.yaml", trtllm_version="main")
    assert yaml.safe_load(path.read_text())["speculative_config"]["decoding_type"] == "Eagle3"


def test_unknown_version_is_refused_before_the_database_is_opened() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown TensorRT-LLM version '0\.9'; choose one of 1\.0, 1\.2, main"):
        serving.write_export("sqlite:////nonexistent/folder/a.db", 1, "trtllm", trtllm_version="0.9")
    with pytest.raises(ConfigurationError, match="unknown TensorRT-LLM version"):
        serving.export_profile(PROFILES["mtp-scheduled"], "trtllm", "1.1")
    assert trtllm_rules("1.2.0").version == "1.2" and trtllm_rules("MAIN").version == "main"


def test_cli_option(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'a.db'}"
    result = CliRunner().invoke(cli, ["export", "1", "--trtllm-version", "0.9", "--db", db])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "Error: unknown TensorRT-LLM version '0.9'; choose one of 1.0, 1.2, main"]
    help_text = CliRunner().invoke(cli, ["export", "--help"]).output
    assert "--trtllm-version" in help_text and f"[default: {DEFAULT_TRTLLM_VERSION}]" in help_text
