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
from autotune.hardware.profile import Metric
from autotune.planning import SIMPLER_WITHIN, parse_batch_sizes, plan_deployment
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
        target = results.upsert_model(session, fingerprint="a" * 64, name=TARGET, role="target",
                                      source=f"builtin:{TARGET}", num_params=9_300_000, num_mtp_modules=2,
                                      vocab_size=259, config=TARGET_CONFIG).id
        draft = results.upsert_model(session, fingerprint="d" * 64, name="autotune-byte-draft", role="draft",
                                     source="builtin:autotune-byte-draft", num_params=480_000, num_mtp_modules=0,
                                     vocab_size=259, config=DRAFT_CONFIG).id
        big = results.upsert_model(session, fingerprint="b" * 64, name="Llama-3-70B", role="target",
                                   source="/models/Llama-3-70B", num_params=70_553_706_496, num_mtp_modules=0,
                                   vocab_size=128256, config=LLAMA_70B).id
        results.upsert_model(session, fingerprint="e" * 64, name="untuned-target", role="target", source="/m/x",
                             num_params=10, num_mtp_modules=0, vocab_size=259, config=TARGET_CONFIG)
        common = dict(workload_fingerprint=workload.sha256, workload_name=workload.label, max_depth=4)
        performance.save_acceptance(session, target_model_id=target, proposer="mtp", draft_model_id=None,
                                    positions=positions(0.8, 0.6, 0.45, 0.3), sources=[1, 2], **common)
        performance.save_acceptance(session, target_model_id=target, proposer="ngram", draft_model_id=None,
                                    positions=positions(0.3, 0.2, 0.1, 0.05), sources=[3], **common)
        performance.save_acceptance(session, target_model_id=target, proposer=f"draft:{'d' * 64}", draft_model_id=draft,
                                    positions=positions(0.6, 0.4, 0.25, 0.15), sources=[4], **common)
        performance.save_acceptance(session, target_model_id=big, proposer="ngram", draft_model_id=None,
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


def test_plan_per_batch_size_on_a_catalog_gpu(url: str) -> None:
    plan = plan_deployment(url, hardware="h200", model=TARGET)
    assert [row.batch_size for row in plan.rows] == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # all fit in 141 GB
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
            "memory_bytes", "fits"} <= set(data["per_batch_size"][0])
    acceptance = {item["proposer"]: item for item in data["basis"]["acceptance"]}
    assert acceptance["mtp"]["measurements"] == 2 and acceptance["mtp"]["sequence_steps"] == 2000
    assert data["basis"]["cost"]["source"] == "roofline" and data["basis"]["cost"]["memory_bw_gbps"] == 4800
    json.dumps(data)  # JSON-ready


def test_batch_sizes_and_max_depth_are_honoured(url: str) -> None:
    plan = plan_deployment(url, hardware="b200", model=TARGET, batch_sizes=(64, 1), max_depth=2)
    assert [row.batch_size for row in plan.rows] == [1, 64]
    assert all(a["depth"] <= 2 for row in plan.rows for a in row.alternatives)


def test_a_model_too_large_for_the_device_does_not_fit(url: str) -> None:
    plan = plan_deployment(url, hardware="l40s", model="Llama-3-70B")
    assert [(row.batch_size, row.fits) for row in plan.rows] == [(1, False)]  # 141 GB of weights, 48 GB of memory
    assert any("does not fit" in warning and "--tp 4" in warning for warning in plan.warnings)
    with pytest.raises(ConfigurationError, match="nothing fits"):
        plan.to_profile()
    assert not plan_deployment(url, hardware="h200", model="Llama-3-70B", batch_sizes=(1,)).rows[0].fits  # 131 GiB
    b200 = plan_deployment(url, hardware="b200", model="Llama-3-70B", batch_sizes=(1, 1024))
    small, large = b200.rows
    assert small.fits and not large.fits  # 180 GiB: the weights fit, not the KV cache of 1024 rows
    assert small.method == "ngram" and small.predicted_speedup > 1.2  # memory-bound: verifying is ~free


def test_a_stored_cpu_probe_as_hardware(url: str) -> None:
    plan = plan_deployment(url, hardware=CPU_NAME, model=TARGET, batch_sizes=(1, 4))
    cost = plan.to_dict()["basis"]["cost"]
    assert (cost["memory_bw_gbps"], cost["peak_tflops"], cost["dtype"]) == (12.5, 0.15, "fp32")
    assert cost["pass_overhead_us"] > 0 and "probe" in cost["figures"]
    assert plan.hardware_origin["fingerprint"] == CPU_FINGERPRINT
    by_prefix = plan_deployment(url, hardware=CPU_FINGERPRINT[:6], model=TARGET, batch_sizes=(1,))
    assert by_prefix.hardware.name == CPU_NAME


def test_a_stored_gpu_profile_takes_the_datasheet_peaks_of_its_nvml_name(url: str) -> None:
    plan = plan_deployment(url, hardware=H100_NAME, model=TARGET, batch_sizes=(1,))
    assert plan.hardware.memory_bw_gbps == 3350 and plan.hardware.bf16_tflops == 989.4
    assert plan.hardware.memory_bytes == 85_520_000_000  # as NVML reported it


def test_parse_batch_sizes() -> None:
    assert parse_batch_sizes("1,8,64") == (1, 8, 64)
    assert parse_batch_sizes(None) is None
    for bad in ("1,x", "0", "", "8,-1"):
        with pytest.raises(ConfigurationError, match="--batch-sizes"):
            parse_batch_sizes(bad)


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
    result = run("plan", "--hardware", "h100-sxm", "--model", TARGET, "--batch-sizes", "1,8", "--json", "--db", url)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["predicted"] is True and data["export"] is None
    assert [row["batch_size"] for row in data["per_batch_size"]] == [1, 8]
    assert all(row["predicted_tokens_per_s"] > 0 for row in data["per_batch_size"])


@pytest.mark.parametrize("fmt", ["trtllm", "vllm", "json"])
def test_export_says_predicted(url: str, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"plan.{fmt}"
    result = run("plan", "--hardware", "h200", "--model", TARGET, "--batch-sizes", "1,4,16", "--export", fmt,
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
    result = CliRunner().invoke(cli, ["plan", "--hardware", "h200", "--model", TARGET, "--batch-sizes", "1",
                                      "--export", "trtllm", "-o", str(out), "--db", url])
    assert result.exit_code == 2 and "--force" in result.stderr
    assert out.read_text() == "mine"


@pytest.mark.parametrize(("args", "fragment"), [
    (("--hardware", "tpu-v9", "--model", TARGET), "unknown hardware 'tpu-v9'"),
    (("--hardware", "h200", "--model", "nope"), "unknown target model 'nope'"),
    (("--hardware", "h200", "--model", "untuned-target"), "autotune tune"),
    (("--hardware", "h200", "--model", TARGET, "--batch-sizes", "1,x"), "--batch-sizes"),
    (("--hardware", "h200", "--model", TARGET, "--batch-sizes", "0"), "--batch-sizes"),
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
        plan_deployment(url, hardware="h200", model=TARGET, workload=other)
    assert "autotune tune" in str(error.value) and "builtin@v1" in str(error.value)
