"""``autotune plan``: what-if predictions from stored acceptance profiles and a roofline, on a real
SQLite database; the CLI's table, JSON and export; bad inputs as one line that leave the database
untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from autotune.cli import cli
from autotune.errors import ConfigurationError
from autotune.hardware.catalog import KERNEL_LATENCY_US
from autotune.hardware.profile import Metric
from autotune.perfmodel.calibration import BANDWIDTH_FRACTION, ENGINE_STEP_OVERHEAD_US
from autotune.planning import (
    SIMPLER_WITHIN,
    GivenAcceptance,
    Scope,
    parse_concurrencies,
    plan_deployment,
    plan_from_config,
)
from autotune.planning.inputs import Deployment
from autotune.store import open_database, performance, repository, results
from autotune.workload import load_workload

TARGET = "autotune-byte-target"
TARGET_CONFIG = {"vocab_size": 259, "d_model": 320, "n_layers": 5, "n_heads": 5, "d_ff": 864, "max_seq_len": 1024,
                 "n_mtp": 2}
DRAFT_CONFIG = {"vocab_size": 259, "d_model": 128, "n_layers": 2, "n_heads": 4, "d_ff": 384, "max_seq_len": 1024,
                "n_mtp": 0}
LLAMA_70B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8192, "num_hidden_layers": 80,
             "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 28672, "vocab_size": 128256,
             "torch_dtype": "bfloat16"}
CPU_NAME = "cpu: Test CPU (2 cores, 8 GiB)"
CPU_FINGERPRINT = "c0ffee0011223344"
H100_NAME = "1x NVIDIA H100 80GB HBM3"


def positions(*rates: float, steps: int = 2000) -> list[dict]:
    return [{"steps": steps, "accepted": round(steps * rate), "drafted": steps} for rate in rates]


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A database as `autotune tune` leaves it: the built-in models, their acceptance profiles on
    the built-in workload, a probed CPU and a probed H100; plus a 70B target with one profile and a
    target without any."""
    url = f"sqlite:///{tmp_path / 'autotune.db'}"
    workload = load_workload(None)
    with open_database(url) as database, database.session() as session:
        target = results.upsert_model(session, results.ModelEntry(fingerprint="a" * 64, name=TARGET, role="target",
                                      source=f"builtin:{TARGET}", num_params=9_300_000, num_mtp_modules=2,
                                      vocab_size=259, config=TARGET_CONFIG)).id
        draft = results.upsert_model(session, results.ModelEntry(
            fingerprint="d" * 64, name="autotune-byte-draft", role="draft",
                                     source="builtin:autotune-byte-draft", num_params=480_000, num_mtp_modules=0,
                                     vocab_size=259, config=DRAFT_CONFIG)).id
        big = results.upsert_model(session, results.ModelEntry(fingerprint="b" * 64, name="Llama-3-70B", role="target",
                                   source="/models/Llama-3-70B", num_params=70_553_706_496, num_mtp_modules=0,
                                   vocab_size=128256, config=LLAMA_70B)).id
        results.upsert_model(session, results.ModelEntry(
            fingerprint="e" * 64, name="untuned-target", role="target", source="/m/x",
                             num_params=10, num_mtp_modules=0, vocab_size=259, config=TARGET_CONFIG))
        common = dict(workload_name=workload.label, max_depth=4)

        def key(target_id: int, proposer: str) -> performance.AcceptanceKey:
            return performance.AcceptanceKey(target_id, proposer, workload.sha256)

        performance.save_acceptance(session, key(target, "mtp"), draft_model_id=None,
                                    positions=positions(0.8, 0.6, 0.45, 0.3), sources=[1, 2], **common)
        performance.save_acceptance(session, key(target, "ngram"), draft_model_id=None,
                                    positions=positions(0.3, 0.2, 0.1, 0.05), sources=[3], **common)
        performance.save_acceptance(session, key(target, f"draft:{'d' * 64}"), draft_model_id=draft,
                                    positions=positions(0.6, 0.4, 0.25, 0.15), sources=[4], **common)
        performance.save_acceptance(session, key(big, "ngram"), draft_model_id=None,
                                    positions=positions(0.5, 0.35, 0.25, 0.2), sources=[5], **common)
        cpu = repository.upsert_hardware(session, fingerprint=CPU_FINGERPRINT, name=CPU_NAME, device_type="cpu",
                                         device_count=1, memory_total_bytes=8 << 30, spec={"ram_total_bytes": 8 << 30})
        repository.add_probe(session, cpu, method_version=1, quick=True, duration_s=1.0, metrics=[
            Metric("memory_bw_gbps", "GB/s", 12.5).to_dict(), Metric("matmul_fp32_gflops", "GFLOP/s", 150.0).to_dict(),
            Metric("launch_overhead_us", "us", 4.0).to_dict()])
        gpu = repository.upsert_hardware(
            session, fingerprint="abcd000011112222", name=H100_NAME, device_type="cuda", device_count=1,
            memory_total_bytes=85_520_000_000,
            spec={"devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 85_520_000_000}],
                  "benchmarked_device": 0})
        repository.add_probe(session, gpu, method_version=1, quick=True, duration_s=1.0,
                             metrics=[Metric("copy_bw_gbps", "GB/s", 2900.0, 3350.0).to_dict()])
    return url


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


# -- the plan -----------------------------------------------------------------------------------------


def test_plan_per_concurrency_on_a_catalog_gpu(url: str) -> None:
    plan = plan_deployment(url, hardware="h200", model=TARGET)
    assert [row.concurrency for row in plan.rows] == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # all fit in 141 GB
    for row in plan.rows:
        assert row.fits and row.memory_bytes < row.memory_limit_bytes == int(0.9 * 141 * 2 ** 30)
        assert row.predicted_tokens_per_s_low < row.predicted_tokens_per_s < row.predicted_tokens_per_s_high
        assert row.predicted_speedup == pytest.approx(row.predicted_tokens_per_s / row.predicted_baseline_tokens_per_s)
        assert row.predicted_tpot_ms_p50 > 0
        fastest = row.alternatives[0]
        assert fastest["predicted_tokens_per_s"] == max(a["predicted_tokens_per_s"] for a in row.alternatives)
        # The fastest, or a simpler configuration within SIMPLER_WITHIN of it.
        assert row.predicted_tokens_per_s >= (1 - SIMPLER_WITHIN) * fastest["predicted_tokens_per_s"]
        assert {a["label"].split("@")[0] for a in row.alternatives} == {"none", "mtp", "ngram",
                                                                         "draft:autotune-byte-draft"}
    # A tiny model on an H200 is launch-bound: MTP's modules run inside the target's pass, so MTP wins.
    assert plan.rows[0].method == "mtp" and plan.rows[0].predicted_speedup > 1.3
    data = plan.to_dict()
    assert data["predicted"] is True and data["hardware"]["origin"] == "catalog"
    assert "PREDICTED" in data["title"] and "not measured" in data["title"]
    assert {"predicted_tokens_per_s", "predicted_tokens_per_s_low", "predicted_speedup", "predicted_tpot_ms_p50",
            "memory_bytes", "fits"} <= set(data["per_concurrency"][0])
    acceptance = {item["proposer"]: item for item in data["basis"]["acceptance"]}
    assert acceptance["mtp"]["measurements"] == 2 and acceptance["mtp"]["sequence_steps"] == 2000
    assert data["basis"]["cost"]["source"] == "roofline" and data["basis"]["cost"]["memory_bw_gbps"] == 4800
    json.dumps(data)  # JSON-ready


def test_concurrencies_and_max_depth_are_honoured(url: str) -> None:
    plan = plan_deployment(url, hardware="b200", model=TARGET, scope=Scope(concurrencies=(64, 1), max_depth=2))
    assert [row.concurrency for row in plan.rows] == [1, 64]
    assert all(a["depth"] <= 2 for row in plan.rows for a in row.alternatives)


def test_a_model_too_large_for_the_device_does_not_fit(url: str) -> None:
    plan = plan_deployment(url, hardware="l40s", model="Llama-3-70B")
    assert [(row.concurrency, row.fits) for row in plan.rows] == [(1, False)]  # 141 GB of weights, 48 GB of memory
    assert any("does not fit" in warning and "--tp 4" in warning for warning in plan.warnings)
    with pytest.raises(ConfigurationError, match="nothing fits"):
        plan.to_profile()
    assert not plan_deployment(url, hardware="h200", model="Llama-3-70B", scope=Scope(concurrencies=(1,))).rows[0].fits  # 131 GiB
    b200 = plan_deployment(url, hardware="b200", model="Llama-3-70B", scope=Scope(concurrencies=(1, 1024)))
    small, large = b200.rows
    assert small.fits and not large.fits  # 180 GiB: the weights fit, not the KV cache of 1024 rows
    assert small.method == "ngram" and small.predicted_speedup > 1.2  # memory-bound: verifying is ~free


def test_a_stored_cpu_probe_as_hardware(url: str) -> None:
    plan = plan_deployment(url, hardware=CPU_NAME, model=TARGET, scope=Scope(concurrencies=(1, 4)))
    cost = plan.to_dict()["basis"]["cost"]
    assert (cost["memory_bw_gbps"], cost["peak_tflops"], cost["dtype"]) == (12.5, 0.15, "fp32")
    assert cost["pass_overhead_us"] > 0 and "probe" in cost["figures"]
    assert plan.hardware_origin["fingerprint"] == CPU_FINGERPRINT
    by_prefix = plan_deployment(url, hardware=CPU_FINGERPRINT[:6], model=TARGET, scope=Scope(concurrencies=(1,)))
    assert by_prefix.hardware.name == CPU_NAME


def test_a_stored_gpu_profile_takes_the_datasheet_peaks_of_its_nvml_name(url: str) -> None:
    plan = plan_deployment(url, hardware=H100_NAME, model=TARGET, scope=Scope(concurrencies=(1,)))
    assert plan.hardware.memory_bw_gbps == 3350 and plan.hardware.bf16_tflops == 989.4
    assert plan.hardware.memory_bytes == 85_520_000_000  # as NVML reported it


def test_parse_concurrencies() -> None:
    assert parse_concurrencies("1,8,64") == (1, 8, 64)
    assert parse_concurrencies(None) is None
    for bad in ("1,x", "0", "", "8,-1"):
        with pytest.raises(ConfigurationError, match="--concurrency"):
            parse_concurrencies(bad)


# -- the CLI ------------------------------------------------------------------------------------------


def test_cli_prints_a_predicted_table(url: str) -> None:
    result = run("plan", "--hardware", "h200", "--model", TARGET, "--db", url)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == ("PREDICTED — roofline for NVIDIA H200 SXM 141GB, acceptance measured on builtin@v1; "
                        "not measured")
    assert "mtp@" in result.output and "speedup" in result.output and "fits" in result.output
    assert "acceptance of mtp: measured on builtin@v1, 2 measurement(s)" in result.output
    assert "calibration: bandwidth 0.80 of peak" in result.output
    assert "step costs: predicted by a roofline" in result.output


def test_cli_json(url: str) -> None:
    result = run("plan", "--hardware", "h100-sxm", "--model", TARGET, "--concurrency", "1,8", "--json", "--db", url)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["predicted"] is True and data["export"] is None
    assert [row["concurrency"] for row in data["per_concurrency"]] == [1, 8]
    assert all(row["predicted_tokens_per_s"] > 0 for row in data["per_concurrency"])


def test_a_simpler_configuration_within_the_margin_is_named_with_the_planners_margin(url: str) -> None:
    """On an A100 at c128 the roofline puts ngram@3 within SIMPLER_WITHIN of mtp@3: the text names both."""
    args = ("plan", "--hardware", "a100-80gb", "--model", TARGET, "--concurrency", "64,128", "--db", url)
    rows = json.loads(run(*args, "--json").output)["per_concurrency"]
    simpler = [row for row in rows if row["leader"]]
    assert simpler, "no concurrency here prefers a simpler configuration any more: pick another case"
    text = run(*args).output
    for row in simpler:
        assert (f"concurrency {row['concurrency']}: {row['label']} is within {SIMPLER_WITHIN * 100:g} % of the "
                f"fastest, {row['leader']}, and simpler") in text


@pytest.mark.parametrize("fmt", ["trtllm", "vllm", "json"])
def test_export_says_predicted(url: str, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"plan.{fmt}"
    result = run("plan", "--hardware", "h200", "--model", TARGET, "--concurrency", "1,4,16", "--export", fmt,
                 "-o", str(out), "--db", url)
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output
    text = out.read_text()
    if fmt == "json":
        profile = json.loads(text)["profile"]
        assert profile["details"]["predicted"] is True and profile["study"]["engine"] == "roofline"
        return
    header = [line.removeprefix("# ") for line in text.splitlines() if line.startswith("# ")]
    assert header[0] == "PREDICTED by autotune plan (roofline for NVIDIA H200 SXM 141GB), not measured"
    assert not any(line.startswith("measured") or line.startswith("Measured") for line in header)
    assert any(line.startswith("predicted: ") and "tokens/s [" in line for line in header)
    if fmt == "trtllm":
        config = yaml.safe_load(text)
        assert config["speculative_config"]["decoding_type"] == "MTP"
        assert config["max_batch_size"] == 16


def test_an_existing_export_is_not_overwritten(url: str, tmp_path: Path) -> None:
    out = tmp_path / "plan.yaml"
    out.write_text("mine")
    result = CliRunner().invoke(cli, ["plan", "--hardware", "h200", "--model", TARGET, "--concurrency", "1",
                                      "--export", "trtllm", "-o", str(out), "--db", url])
    assert result.exit_code == 2 and "--force" in result.stderr
    assert out.read_text() == "mine"


@pytest.mark.parametrize(("args", "fragment"), [
    (("--hardware", "tpu-v9", "--model", TARGET), "unknown hardware 'tpu-v9'"),
    (("--hardware", "h200", "--model", "nope"), "unknown target model 'nope'"),
    (("--hardware", "h200", "--model", "untuned-target"), "autotune tune"),
    (("--hardware", "h200", "--model", TARGET, "--concurrency", "1,x"), "--concurrency"),
    (("--hardware", "h200", "--model", TARGET, "--concurrency", "0"), "--concurrency"),
    (("--hardware", "h200", "--model", TARGET, "--max-depth", "0"), "--max-depth"),
    (("--hardware", "h200", "--model", TARGET, "-o", "x.yaml"), "--export"),
    (("--hardware", "h200"), "--model"),
])
def test_bad_input_is_one_line_and_leaves_the_database_unchanged(url: str, args: tuple[str, ...],
                                                                 fragment: str) -> None:
    database = Path(url.removeprefix("sqlite:///"))
    before = database.read_bytes()
    result = CliRunner().invoke(cli, ["plan", *args, "--db", url])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], result.stderr
    assert "Traceback" not in result.output
    assert database.read_bytes() == before


def test_no_acceptance_for_the_workload_names_tune_and_the_stored_workloads(url: str, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text('{"prompt": "def f():", "max_tokens": 16}\n')
    with pytest.raises(ConfigurationError) as error:
        plan_deployment(url, hardware="h200", model=TARGET, scope=Scope(workload=other))
    assert "autotune tune" in str(error.value) and "builtin@v1" in str(error.value)


# -- a plan from a config, no tuning beforehand ---------------------------------------------------------

CONFIGS = Path(__file__).parents[1] / "data" / "configs"
LLAMA_8B = str(CONFIGS / "llama-3.1-8b.json")
DEEPSEEK = str(CONFIGS / "deepseek-v3.json")


def config_plan(rates=None, concurrencies=None, **options):  # noqa: ANN001, ANN003, ANN201 - plan_from_config's
    """A plan from a config (acceptance length 3.2 at depth 4 unless ``rates`` are given), priced by
    the roofline unless ``step_costs`` says otherwise (these tests check the roofline's physics;
    tests/planning/test_plan_silicon.py the measured kernels')."""
    options.setdefault("step_costs", "roofline")
    deployment = Deployment(**{k: options.pop(k) for k in ("tp", "dtype", "kv_dtype", "engine", "isl", "osl",
                                                           "step_costs", "ep") if k in options})
    acceptance = GivenAcceptance(rates=rates) if rates is not None else GivenAcceptance(length=(3.2, 4))
    return plan_from_config("sqlite:///nowhere-at-all.db", hardware=options.pop("hardware", "h200"),
                            config=options.pop("config", LLAMA_8B), acceptance=acceptance,
                            scope=Scope(concurrencies=concurrencies), deployment=deployment, **options)


def test_cli_plans_llama_8b_from_its_config_without_a_database(tmp_path: Path) -> None:
    database = tmp_path / "autotune.db"
    result = run("plan", "--config", LLAMA_8B, "--hardware", "h200", "--acceptance-length", "3.2",
                 "--step-costs", "roofline", "--db", f"sqlite:///{database}")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("PREDICTED — roofline for NVIDIA H200 SXM 141GB, acceptance given "
                                    "(--acceptance-length 3.2 at depth 4), isl 1024 / osl 1024")
    assert "ngram@" in result.output and "calibration: bandwidth 0.80 of peak" in result.output
    assert not database.exists()  # nothing written


def test_json_carries_calibration_acceptance_origin_and_warnings() -> None:
    result = run("plan", "--config", LLAMA_8B, "--hardware", "h200", "--acceptance", "0.8,0.6,0.4",
                 "--concurrency", "1,64", "--json", "--step-costs", "roofline", "--db", "sqlite:///nowhere-at-all.db")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert "GEMM 0.70 of peak" in data["calibration"] and data["acceptance_origin"] == ["given"]
    assert isinstance(data["warnings"], list)
    assert data["basis"]["acceptance"][0]["rates"] == [0.8, 0.6, 0.4]


def test_at_batch_1_llama_8b_is_weight_reads_at_the_achieved_bandwidth_plus_the_kernel_floor() -> None:
    row = config_plan(concurrencies=(1,)).rows[0]
    baseline_step = 1 / row.predicted_baseline_tokens_per_s
    weights = (8.03e9 - 128256 * 4096) * 2 / (4800e9 * BANDWIDTH_FRACTION)  # the input embeddings are a lookup
    # + TensorRT-LLM's step overhead and every kernel's latency (32 layers x 10 kernels + 3, 3.5 us each)
    floor = weights + (ENGINE_STEP_OVERHEAD_US["trtllm"] + (32 * 10 + 3) * KERNEL_LATENCY_US) * 1e-6
    assert floor < baseline_step < floor * 1.05  # + KV reads and prefill


def test_tp_2_halves_the_memory_per_gpu_and_speeds_up_less_than_2x() -> None:
    one, two = config_plan(concurrencies=(1, 64)), config_plan(concurrencies=(1, 64), tp=2)
    for a, b in zip(one.rows, two.rows):
        assert b.memory_bytes == pytest.approx(a.memory_bytes / 2, rel=0.01)
        ratio = b.predicted_baseline_tokens_per_s / a.predicted_baseline_tokens_per_s
        assert 1.2 < ratio < 2.0  # weights split, but the overhead and the all-reduces are not
    assert two.to_dict()["basis"]["cost"]["tp"] == 2 and two.hardware.tp == 2


def test_fp8_halves_the_weight_reads_and_doubles_the_compute_roof() -> None:
    bf16, fp8 = config_plan(concurrencies=(1, 256)), config_plan(concurrencies=(1, 256), dtype="fp8")
    assert fp8.hardware.peak_tflops == pytest.approx(2 * bf16.hardware.peak_tflops, rel=1e-3)
    small_gain = fp8.rows[0].predicted_baseline_tokens_per_s / bf16.rows[0].predicted_baseline_tokens_per_s
    assert 1.5 < small_gain < 2.0  # memory-bound: half the bytes, the same overhead
    assert fp8.rows[0].memory_bytes < 0.55 * bf16.rows[0].memory_bytes
    kv8 = config_plan(concurrencies=(256,), kv_dtype="fp8")
    assert kv8.rows[0].memory_bytes < bf16.rows[1].memory_bytes  # the KV cache in one byte per element


def test_kv_reads_stay_at_large_batches() -> None:
    short, long = config_plan(concurrencies=(256,), isl=128, osl=128), config_plan(concurrencies=(256,), isl=8192, osl=1024)
    assert long.rows[0].predicted_baseline_tokens_per_s < 0.5 * short.rows[0].predicted_baseline_tokens_per_s


def test_deepseek_v3_mtp_from_its_config_and_the_smallest_tp_that_fits() -> None:
    single = config_plan(config=DEEPSEEK, rates=[0.85, 0.7], concurrencies=(1,))
    assert not single.rows[0].fits
    assert any("does not fit" in w and "--tp 8" in w for w in single.warnings)
    eight = config_plan(config=DEEPSEEK, hardware="b200", rates=[0.85, 0.7], tp=8,
                        dtype="fp4", concurrencies=(1, 64))
    assert all(row.fits and row.method == "mtp" for row in eight.rows)
    assert eight.hardware.dtype == "fp4" and eight.to_dict()["model"]["num_mtp_modules"] == 1


def test_overhead_warning_when_the_assumption_dominates(url: str) -> None:
    tiny = plan_deployment(url, hardware="h200", model=TARGET, scope=Scope(concurrencies=(1,)))  # 9M parameters: all overhead
    assert any("step overhead" in warning and "concurrency 1" in warning for warning in tiny.warnings)
    assert not any("step overhead" in warning for warning in config_plan(concurrencies=(1,)).warnings)


def test_acceptance_from_a_tuned_target_is_a_proxy(url: str) -> None:
    plan = plan_from_config(url, hardware="h200", config=LLAMA_8B, acceptance=GivenAcceptance(proxy=TARGET),
                            scope=Scope(concurrencies=(1,)))
    assert plan.to_dict()["acceptance_origin"] == ["proxy"]
    assert any(w.startswith("acceptance is a proxy") and TARGET in w for w in plan.warnings)
    assert plan.rows[0].method in ("ngram", "none")


def test_a_stored_probe_of_the_same_gpu_model_calibrates_the_bandwidth(url: str) -> None:
    plan = plan_from_config(url, hardware="h100-sxm", config=LLAMA_8B, acceptance=GivenAcceptance(rates=[0.7]),
                            scope=Scope(concurrencies=(1,)),                             deployment=Deployment(step_costs="roofline"))
    assert plan.hardware.bandwidth_fraction == pytest.approx(2900 / 3350)
    assert "measured by probe" in plan.basis["calibration"] and H100_NAME in plan.basis["calibration"]
    assert "0.80" in config_plan(concurrencies=(1,)).basis["calibration"]  # no probe: the assumed share


def test_a_draft_config_is_the_proposer(tmp_path: Path) -> None:
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 16,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256}))
    plan = config_plan(draft_config=str(draft), rates=[0.7, 0.5], concurrencies=(1,))
    assert {a["method"] for a in plan.rows[0].alternatives} == {"none", "draft"}


@pytest.mark.parametrize(("config", "args", "fragment"), [
    ({"architectures": ["BertForMaskedLM"], "hidden_size": 8}, (), "not a causal language model"),
    ({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32, "vocab_size": 10,
      "intermediate_size": 64}, (), "lacks num_attention_heads"),
    (None, ("--acceptance", "0.9,1.3"), "[0, 1]"),
    (None, ("--acceptance", "0.5,0.7"), "rise with position"),
    (None, ("--tp", "3"), "--tp 3 does not divide"),
    (None, ("--acceptance-from", TARGET, "--acceptance", "0.5"), "one way"),
    (None, ("--dtype", "fp4"), "no FP4 tensor cores"),
])
def test_bad_config_input_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, config: dict | None,
                                                                args: tuple[str, ...], fragment: str) -> None:
    path = LLAMA_8B
    if config is not None:
        path = str(tmp_path / "config.json")
        Path(path).write_text(json.dumps(config))
    database = tmp_path / "autotune.db"
    acceptance = () if any(a.startswith("--acceptance") for a in args) else ("--acceptance-length", "3.2")
    result = CliRunner().invoke(cli, ["plan", "--config", path, "--hardware", "h200", *acceptance, *args,
                                      "--db", f"sqlite:///{database}"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert not database.exists()


def test_export_of_a_config_plan_says_where_its_acceptance_came_from(tmp_path: Path) -> None:
    out = tmp_path / "plan.yaml"
    result = run("plan", "--config", LLAMA_8B, "--hardware", "h200", "--acceptance-length", "3.2", "--concurrency",
                 "1,8", "--export", "trtllm", "-o", str(out), "--db", f"sqlite:///{tmp_path / 'autotune.db'}")
    assert result.exit_code == 0, result.output
    header = [line.removeprefix("# ") for line in out.read_text().splitlines() if line.startswith("# ")]
    assert header[0].startswith("PREDICTED") and header[3].startswith("acceptance given (--acceptance-length 3.2")
