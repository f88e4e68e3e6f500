"""Issue 20, item 3: what an export deploys is what the engine measured with.

For every method (none, mtp, draft with a whole draft model, draft with an EAGLE-3 head, ngram),
with one draft length at every concurrency and with a per-concurrency schedule, and for each
TensorRT-LLM line the exporter writes: the export's speculative block, less the schedule the
exporter adds (``draft_len_schedule`` / ``max_concurrency``, vLLM's
``num_speculative_tokens_per_batch_size``), equals the block the engine adapter's runner hands its
engine when it measures the profile's configuration. The expected block is built as the runners
build it: the adapter's ``check_config`` judges the model folders, then
:func:`autotune.engines.trtllm.mapping.llm_arguments` (TrtllmRunner._build) or
:func:`autotune.engines.vllm.mapping.engine_arguments` (VllmRunner._build). SGLang has no adapter,
so there is no measured block to compare with.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

import profile_factory as factory
from autotune.engines.base import EngineConfig
from autotune.engines.trtllm import checks as trtllm_checks
from autotune.engines.trtllm.mapping import ADVANCED_SAMPLING_FIELD, llm_arguments
from autotune.engines.trtllm.versions import TRTLLM_VERSIONS, trtllm_rules
from autotune.engines.vllm import checks as vllm_checks
from autotune.engines.vllm.mapping import EngineSettings, engine_arguments
from autotune.models.folder import ModelFolders
from autotune.serving import export_profile
from autotune.serving.speculation import with_draft_config

MAX_NGRAM = 4  # the n-gram window the study measured with (stored in the profile's details)
METHODS = ("none", "mtp", "draft", "eagle3", "ngram")
SHAPES = {  # the profile's table: concurrency -> depth (0: speculation lost to none there)
    "constant": {1: 3, 2: 3, 4: 3},
    "scheduled": {1: 4, 2: 4, 4: 2, 8: 0},
}
# What TrtllmRunner passes as advanced_sampling (its _greedy_only): whether the installed class
# declares allow_advanced_sampling. main declares it as a deprecated no-op, which the export leaves
# out (autotune.engines.trtllm.versions: advanced_sampling_flag).
RUNNER_ADVANCED_SAMPLING = {"1.0": False, "1.2": True, "main": True}
# What each writer adds to the adapter's block: the per-concurrency schedule.
TRTLLM_SCHEDULE_KEYS = {"draft_len_schedule", "max_concurrency"}
VLLM_SCHEDULE_KEYS = {"num_speculative_tokens_per_batch_size"}


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    """Model folders as the engines read them: a target with MTP layers vLLM runs, a whole draft
    model and an EAGLE-3 head."""
    configs = {
        "target": {"architectures": ["MiMoForCausalLM"], "model_type": "mimo", "num_nextn_predict_layers": 4},
        "draft": {"architectures": ["LlamaForCausalLM"], "model_type": "llama"},
        "eagle3": {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama"},
    }
    for name, config in configs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config))
    return {name: tmp_path / name for name in configs}


def profile_and_config(method: str, shape: str, folders: dict[str, Path]):  # noqa: ANN201
    """The profile a study of ``method`` stores (its draft read from the folder, as write_export
    does) and the configuration it measured at the profile's concurrency, 1."""
    engine_method = "draft" if method == "eagle3" else method
    depths = SHAPES[shape] if method != "none" else dict.fromkeys(SHAPES[shape], 0)
    table = {b: (engine_method, d) if d else ("none", 0) for b, d in depths.items()}
    draft = str(folders[method]) if engine_method == "draft" else None
    profile = factory.profile_data(engine_method, depths[1], 1, table, draft_source=draft or "",
                                   details={"max_ngram": MAX_NGRAM} if method == "ngram" else None)
    return with_draft_config(profile), EngineConfig(engine_method, depths[1], draft)


def exported_trtllm_block(profile, version: str) -> dict | None:  # noqa: ANN001
    """``speculative_config`` of the ``trtllm`` export; the ``trtllm-bench`` script embeds the same YAML."""
    config = yaml.safe_load(export_profile(profile, "trtllm", version))
    bench = export_profile(profile, "trtllm-bench", version)
    assert yaml.safe_load(bench.split("<<'YAML'\n", 1)[1].split("\nYAML\n", 1)[0]) == config
    return config.get("speculative_config")


def exported_vllm_block(profile) -> dict | None:  # noqa: ANN001
    """``--speculative-config`` of the ``vllm`` export, as ``vllm serve`` receives it."""
    words = shlex.split(export_profile(profile, "vllm").replace("\\\n", " ").split("exec ", 1)[1])
    if "--speculative-config" not in words:
        return None
    return json.loads(words[words.index("--speculative-config") + 1])


def without(block: dict | None, keys: set[str]) -> dict | None:
    return None if block is None else {key: value for key, value in block.items() if key not in keys}


@pytest.mark.parametrize("version", TRTLLM_VERSIONS)
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("method", METHODS)
def test_trtllm_export_deploys_what_the_engine_measured(method: str, shape: str, version: str,
                                                        folders: dict[str, Path]) -> None:
    profile, config = profile_and_config(method, shape, folders)
    rules = trtllm_rules(version)
    kind = trtllm_checks.check_config(config, folders["target"], ModelFolders())
    measured = llm_arguments(config, str(folders["target"]), 8, kind if config.method == "draft" else None,
                             max_ngram=MAX_NGRAM, advanced_sampling=RUNNER_ADVANCED_SAMPLING[version])
    deployed = without(exported_trtllm_block(profile, version), TRTLLM_SCHEDULE_KEYS)
    if kind is None:
        assert "speculative_config" not in measured and deployed is None
        return
    fields = dict(measured["speculative_config"].fields)
    if not rules.advanced_sampling_flag:
        fields.pop(ADVANCED_SAMPLING_FIELD, None)
    assert deployed == {"decoding_type": rules.decoding_types[kind], **fields}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("method", METHODS)
def test_vllm_export_deploys_what_the_engine_measured(method: str, shape: str, folders: dict[str, Path]) -> None:
    profile, config = profile_and_config(method, shape, folders)
    kind = vllm_checks.check_config(config, folders["target"], ModelFolders())
    measured = engine_arguments(config, str(folders["target"]), 8, kind, EngineSettings(max_ngram=MAX_NGRAM))
    assert without(exported_vllm_block(profile), VLLM_SCHEDULE_KEYS) == measured.get("speculative_config")


def test_the_scheduled_profiles_do_carry_a_schedule(folders: dict[str, Path]) -> None:
    """The comparisons above strip the schedule: it is there to strip, for every speculative method,
    except where the version cannot say it: 1.0 has no draft_len_schedule, and a one-model kind is
    never switched off with max_concurrency (its floor is draft length 1, TensorRT-LLM PR #16888)."""
    for method in METHODS[1:]:
        profile, _ = profile_and_config(method, "scheduled", folders)
        assert VLLM_SCHEDULE_KEYS <= set(exported_vllm_block(profile))
        for version in TRTLLM_VERSIONS:
            scheduled = TRTLLM_SCHEDULE_KEYS & set(exported_trtllm_block(profile, version))
            assert bool(scheduled) == (version != "1.0" or method not in ("mtp", "eagle3")), (method, version)
