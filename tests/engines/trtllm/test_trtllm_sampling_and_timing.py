"""Issue 13, items 2 and 7, against the stricter stand-in (in this process, as a given release):
one-model MTP / EAGLE-3 sample only with allow_advanced_sampling where a version has the flag, a
sampled run is refused where it has none, and step costs are timed at forced acceptance."""

from __future__ import annotations

import os

import pytest

from autotune.engines.base import EngineConfig
from autotune.engines.trtllm.timing import FORCE_ACCEPTED_ENV, timing_point
from autotune.errors import EngineError, UnsupportedConfigError
from autotune.workload import Request, Workload

WORKLOAD = Workload("w", [Request("def parse(argv):", 12), Request("class Cache:", 9), Request("import os", 7)])
SAMPLED_WORKLOAD = Workload("s", [Request("def parse(argv):", 12, temperature=0.7), Request("import os", 7)])
RELEASES = {"1.0": "1.0.0", "1.2": "1.2.0", "main": "1.3.0rc12"}


def test_the_stand_in_falls_back_to_greedy_as_the_real_one_does(fake_release) -> None:
    # 1.2: SpecWorkerBase._sample_tokens_for_batch takes the argmax unless allow_advanced_sampling.
    def greedy_only(version: str, **fields) -> bool:
        llmapi = fake_release(RELEASES[version])
        spec = llmapi.MTPDecodingConfig(max_draft_len=1, num_nextn_predict_layers=1, **fields)
        return spec.one_model and not spec.samples

    assert greedy_only("1.2")
    assert not greedy_only("1.2", allow_advanced_sampling=True)
    assert not greedy_only("main")  # sampling detected per request; the flag is a no-op
    assert greedy_only("1.0")  # no flag at all
    llmapi = fake_release(RELEASES["1.0"])
    with pytest.raises(ValueError, match="extra inputs"):
        llmapi.MTPDecodingConfig(max_draft_len=1, allow_advanced_sampling=True)


@pytest.mark.parametrize("version", ["1.2", "main"])
def test_one_model_mtp_samples_where_the_flag_exists(version, fake_release, make_runner, mtp_target_dir) -> None:
    fake_release(RELEASES[version])
    runner = make_runner(mtp_target_dir)
    runner.load(EngineConfig("mtp", 1))
    greedy = runner.measure(WORKLOAD, 2, temperature=0.0).outputs
    sampled = runner.measure(WORKLOAD, 2, temperature=1.0, seed=1)
    assert sampled.outputs != greedy  # before, 1.2 fell back to greedy here and it was stored as sampled
    assert sampled.temperature == 1.0
    assert runner._speculative_class().model_fields.keys() >= {"allow_advanced_sampling"}  # noqa: SLF001


@pytest.mark.parametrize("temperature", [1.0, None])  # None: the requests' own temperatures (0.7)
def test_without_the_flag_a_sampled_run_is_refused_not_reported(temperature, fake_release, make_runner, mtp_target_dir,
                                                                 target_dir, eagle3_dir) -> None:
    fake_release(RELEASES["1.0"])
    for target, config in [(mtp_target_dir, EngineConfig("mtp", 1)), (target_dir, EngineConfig("draft", 2, str(eagle3_dir)))]:
        runner = make_runner(target)
        runner.load(config)
        with pytest.raises(UnsupportedConfigError, match="decodes greedily; a sampled measurement would really be greedy"):
            runner.measure(SAMPLED_WORKLOAD, 2, temperature=temperature)
        assert runner.measure(SAMPLED_WORKLOAD, 2, temperature=0.0).drafted_tokens > 0  # greedy runs are fine
    runner = make_runner(target_dir)
    runner.load(EngineConfig("ngram", 2))  # the two-model sampler samples in every version
    assert runner.measure(SAMPLED_WORKLOAD, 2, temperature=1.0).drafted_tokens > 0


@pytest.mark.parametrize("version", ["1.2", "main"])
def test_timing_runs_force_full_acceptance(version, fake_release, make_runner, mtp_target_dir, draft_dir) -> None:
    llmapi = fake_release(RELEASES[version])
    runner = make_runner(mtp_target_dir)
    configs = [EngineConfig("none"), EngineConfig("mtp", 1), EngineConfig("ngram", 2), EngineConfig("draft", 2, str(draft_dir))]
    points = runner.time_steps(configs, WORKLOAD, [1, 3], steps=4, rounds=2)
    assert len(points) == len(configs) * 2 * 2
    assert FORCE_ACCEPTED_ENV not in os.environ  # measurements after timing see real acceptance
    # Only the baseline's LLM is left, timed last and built without the variable: the study's trials reuse it.
    assert runner.config == EngineConfig("none") and runner._llm is not None  # noqa: SLF001
    for point in points:
        assert point["steps"] >= 3 and point["verify_s"] > 0 and point["prefill_s"] > 0, point
        assert point["prefill_tokens"] == point["concurrency"] * len("def parse(argv):") + point["concurrency"]
        if point["method"] == "draft":
            assert point["propose_s"] > 0  # the two-model drafter's own latency
        else:
            assert point["propose_s"] == 0.0
        if point["method"] == "mtp":
            assert point["drafted_per_step"] == 1.0  # MTP always drafts; all of it accepted
    assert {p["method"] for p in points if p["drafted_per_step"] > 0} == {"mtp", "ngram", "draft"}
    assert llmapi.FORCE_ACCEPTED_ENV == FORCE_ACCEPTED_ENV


def test_forced_acceptance_reaches_the_llm_and_steps_verify_depth_plus_one(fake_release, make_runner, target_dir,
                                                                           draft_dir) -> None:
    fake_release(RELEASES["1.2"])
    runner = make_runner(target_dir)
    (point,) = runner.time_steps([EngineConfig("draft", 3, str(draft_dir))], WORKLOAD, [2], steps=5, rounds=1)
    # every step accepted all 3 drafts: 4 tokens per step, so max_tokens = 5 * 4 + 1 took exactly 5 full steps
    assert point["steps"] == 5 and point["drafted_per_step"] == 3.0
    runner.load(EngineConfig("draft", 3, str(draft_dir)))
    run = runner.measure(WORKLOAD, 1)
    assert run.accepted_tokens < run.drafted_tokens  # real acceptance again


def test_unforced_acceptance_is_refused_for_timing() -> None:
    stats = [{"iterLatencyMS": 2.0, "inflightBatchingStats": {"numContextRequests": 2, "numGenRequests": 0}},
             {"iterLatencyMS": 1.0, "inflightBatchingStats": {"numContextRequests": 0, "numGenRequests": 2},
              "specDecodingStats": {"numDraftTokens": 4, "numAcceptedTokens": 3}}]
    with pytest.raises(EngineError, match="does not force acceptance"):
        timing_point(stats, EngineConfig("mtp", 2), 2, 0, 10, drafter_timed=False)
    stats[1]["specDecodingStats"]["numAcceptedTokens"] = 4
    point = timing_point(stats, EngineConfig("mtp", 2), 2, 0, 10, drafter_timed=False)
    assert (point["steps"], point["verify_s"], point["prefill_s"], point["drafted_per_step"]) == (1, 1e-3, 2e-3, 2.0)
    with pytest.raises(EngineError, match="no TensorRT-LLM iteration ran 3 sequences"):
        timing_point(stats, EngineConfig("mtp", 2), 3, 0, 10, drafter_timed=False)


def test_trtllm_ngram_costs_come_from_its_own_steps_not_the_verify_split(fake_release, make_runner, target_dir,
                                                                         draft_dir) -> None:
    # TensorRT-LLM times no n-gram drafting apart (propose_s 0): splitting its step into proposing +
    # the draft model's verify would drop the n-gram share of the step.
    from autotune.perfmodel.cost import CostPoint, CostProfile

    fake_release(RELEASES["1.2"])
    runner = make_runner(target_dir)
    configs = [EngineConfig("none"), EngineConfig("ngram", 2), EngineConfig("draft", 2, str(draft_dir))]
    points = [CostPoint.from_dict(p) for p in runner.time_steps(configs, WORKLOAD, [1, 2], steps=3, rounds=1)]
    ngram = [p for p in points if p.method == "ngram"]
    assert all(p.propose_s == 0.0 for p in ngram)
    costs = CostProfile(points)
    for p in ngram:
        assert costs.step_s("ngram", None, 2, p.concurrency) == pytest.approx(p.step_s)
