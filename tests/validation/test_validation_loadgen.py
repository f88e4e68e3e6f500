"""The ``vllm bench serve`` command one run uses, the workload as its custom dataset, and the figures
read from a result file that vllm bench serve 0.32.0 saved (data/vllm_bench_serve_c1.json: a real run
against the exported built-in draft profile at concurrency 1, its per-request lists cut to two)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autotune.errors import EngineError
from autotune.validation.loadgen import bench_command, goodput_args, num_prompts, read_result, write_dataset
from autotune.workload import Request, Workload, builtin_workload

FIXTURE = Path(__file__).parent / "data" / "vllm_bench_serve_c1.json"


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_the_command_drives_the_server_closed_loop_at_the_concurrency(tmp_path: Path) -> None:
    result = tmp_path / "out" / "r.json"
    command = bench_command(["vllm"], "http://127.0.0.1:8000", tmp_path / "w.jsonl", 4, 16, 4, result,
                            {"tpot_ms": 8.0, "ttft_ms": None})
    assert command[:3] == ["vllm", "bench", "serve"]
    assert flag(command, "--base-url") == "http://127.0.0.1:8000"
    assert flag(command, "--dataset-name") == "custom" and flag(command, "--dataset-path") == str(tmp_path / "w.jsonl")
    assert flag(command, "--custom-output-len") == "-1"  # each prompt's own output_tokens
    assert flag(command, "--max-concurrency") == "4" and flag(command, "--request-rate") == "inf"
    assert flag(command, "--num-prompts") == "16" and flag(command, "--num-warmups") == "4"
    assert flag(command, "--metric-percentiles") == "50,99" and "tpot" in flag(command, "--percentile-metrics")
    assert flag(command, "--goodput") == "tpot:8"
    assert flag(command, "--temperature") == "0" and "--ignore-eos" in command and "--skip-chat-template" in command
    assert flag(command, "--result-dir") == str(result.parent) and flag(command, "--result-filename") == "r.json"
    assert "--save-result" in command


def test_goodput_follows_the_studys_slo() -> None:
    assert goodput_args({}) == []
    assert goodput_args({"tpot_ms": None, "ttft_ms": None, "percentile": 99}) == []
    assert goodput_args({"tpot_ms": 8.5, "ttft_ms": 200}) == ["--goodput", "tpot:8.5", "ttft:200"]


def test_the_dataset_is_the_workload_with_its_output_lengths(tmp_path: Path) -> None:
    workload = Workload("w", (Request("déf f(", 32), Request("class A:", 7)))
    lines = write_dataset(workload, tmp_path / "w.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [{"prompt": "déf f(", "output_tokens": 32},
                                                    {"prompt": "class A:", "output_tokens": 7}]


def test_a_short_workload_is_repeated_to_keep_every_client_busy() -> None:
    workload = builtin_workload()
    assert num_prompts(workload, 1) == len(workload.requests)
    assert num_prompts(workload, 64) == 4 * 64


def test_figures_of_a_saved_run() -> None:
    figures = read_result(FIXTURE)
    assert figures.output_tokens_per_s == pytest.approx(95.352, abs=1e-3)
    assert figures.tpot_ms_p50 == pytest.approx(9.555, abs=1e-3)
    assert figures.tpot_ms_p99 == pytest.approx(11.327, abs=1e-3)
    assert figures.ttft_ms_p50 == pytest.approx(84.332, abs=1e-3)
    assert figures.ttft_ms_p99 == pytest.approx(121.596, abs=1e-3)
    assert figures.requests_per_s == pytest.approx(1.0144, abs=1e-4)
    assert figures.goodput_requests_per_s is None  # the study had no SLO
    assert (figures.completed, figures.failed) == (16, 0)


@pytest.mark.parametrize("damage", ["missing", "not json", "no p99", "nothing completed"])
def test_a_bad_result_file_is_one_engine_error(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "r.json"
    data = json.loads(FIXTURE.read_text())
    if damage == "not json":
        path.write_text("{")
    elif damage == "no p99":
        del data["p99_tpot_ms"]
        path.write_text(json.dumps(data))
    elif damage == "nothing completed":
        path.write_text(json.dumps({**data, "completed": 0, "failed": 16}))
    with pytest.raises(EngineError) as error:
        read_result(path)
    assert "\n" not in str(error.value)


def test_the_fixture_is_what_vllm_bench_serve_writes() -> None:
    # A guard on the fixture itself: the keys read_result needs are those of vLLM 0.32.0's file.
    data = json.loads(FIXTURE.read_text())
    assert data["backend"] == "vllm" and data["max_concurrency"] == 1
    assert {"output_throughput", "p50_tpot_ms", "p99_ttft_ms", "request_goodput"} <= set(data)
    assert shutil.which("bash")
