#!/usr/bin/env bash
# `autotune validate` for TensorRT-LLM, as a script: a stored profile's trtllm export served by
# trtllm-serve next to the best fixed depth and none, each driven by TensorRT-LLM's own serving
# benchmark client at each concurrency level, RUNS times. UNRUN: written for a GPU machine with
# TensorRT-LLM installed; no such machine ran it yet (README limits, docs/validation.md).
#
#   scripts/validate_trtllm.sh DB_URL PROFILE_ID TARGET_DIR
#
# Environment: PYTHON (the python of TensorRT-LLM, default python3), OUT (default ./trtllm-validate),
# CONCURRENCY (default "1 4"), RUNS (default 3), ISL / OSL (prompt and output tokens of the random
# dataset, default 128 / 128), FIXED_DEPTH (default: the profile's own depth), PORT (default 8765),
# START_TIMEOUT (seconds to /health, default 1800).
#
# Read in TensorRT-LLM's sources (GitHub NVIDIA/TensorRT-LLM, main at 0228a71, 2026-12):
# tensorrt_llm/serve/scripts/benchmark_serving.py (run as `python -m tensorrt_llm.serve.scripts.
# benchmark_serving`): --backend openai, --model (required), --base-url, --dataset-name random with
# --random-input-len/--random-output-len, --max-concurrency, --num-prompts, --ignore-eos,
# --percentile-metrics, --metric-percentiles, --goodput, --save-result/--result-dir/--result-filename;
# its JSON has output_throughput and p50_/p99_ tpot_ms and ttft_ms as vLLM's does, so
# autotune.validation.loadgen.read_result reads it. trtllm-serve MODEL --extra_llm_api_options YAML
# --host --port (DESIGN.md section 4; newer lines also take --config). Differences from the vLLM
# validation, said plainly: the prompts are the client's random ones (ISL/OSL), not the study's
# workload; acceptance is not read (trtllm-serve's /metrics is not the Prometheus text vLLM serves);
# the fixed server is the export with its draft_len_schedule and max_concurrency removed and
# max_draft_len set to FIXED_DEPTH, the none server the export without speculative_config.
set -euo pipefail

if [[ $# -ne 3 ]]; then
    sed -n '2,12p' "$0"
    exit 64
fi
DB=$1
PROFILE=$2
TARGET=$3
PYTHON=${PYTHON:-python3}
OUT=${OUT:-trtllm-validate}
CONCURRENCY=${CONCURRENCY:-1 4}
RUNS=${RUNS:-3}
ISL=${ISL:-128}
OSL=${OSL:-128}
PORT=${PORT:-8765}
START_TIMEOUT=${START_TIMEOUT:-1800}
mkdir -p "$OUT"

autotune export "$PROFILE" --format trtllm -o "$OUT/schedule.yaml" --force --db "$DB"
depth=${FIXED_DEPTH:-$(autotune profiles show "$PROFILE" --json --db "$DB" | "$PYTHON" -c \
    'import json, sys; print(json.load(sys.stdin)["depth"])')}
# The two reference servers, from the export: same limits, one fixed depth / no speculation.
"$PYTHON" - "$OUT" "$depth" <<'PY'
import sys
import yaml

out, depth = sys.argv[1], int(sys.argv[2])
config = yaml.safe_load(open(f"{out}/schedule.yaml"))
spec = dict(config.get("speculative_config") or {})
for key in ("draft_len_schedule", "max_concurrency"):
    spec.pop(key, None)
if spec:
    spec["max_draft_len"] = depth
    if "num_nextn_predict_layers" in spec:
        spec["num_nextn_predict_layers"] = depth
yaml.safe_dump({**config, "speculative_config": spec}, open(f"{out}/fixed.yaml", "w"), sort_keys=False)
yaml.safe_dump({k: v for k, v in config.items() if k != "speculative_config"}, open(f"{out}/none.yaml", "w"),
               sort_keys=False)
PY

server=""
stop_server() {  # the whole process group: trtllm-serve and its workers
    if [[ -n $server ]]; then
        kill -TERM -- "-$server" 2>/dev/null || true
        for _ in $(seq 30); do kill -0 -- "-$server" 2>/dev/null || break; sleep 1; done
        kill -KILL -- "-$server" 2>/dev/null || true
        server=""
    fi
}
trap stop_server EXIT INT TERM

for name in schedule fixed none; do
    echo "== $name ($OUT/$name.yaml) on port $PORT"
    setsid trtllm-serve "$TARGET" --backend pytorch --extra_llm_api_options "$OUT/$name.yaml" \
        --host 127.0.0.1 --port "$PORT" >"$OUT/$name.log" 2>&1 &
    server=$!
    waited=0
    until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do
        kill -0 "$server" 2>/dev/null || { echo "trtllm-serve exited: see $OUT/$name.log" >&2; exit 2; }
        (( waited++ < START_TIMEOUT )) || { echo "no /health within $START_TIMEOUT s: $OUT/$name.log" >&2; exit 2; }
        sleep 1
    done
    for c in $CONCURRENCY; do
        for run in $(seq "$RUNS"); do
            "$PYTHON" -m tensorrt_llm.serve.scripts.benchmark_serving --backend openai --model "$TARGET" \
                --base-url "http://127.0.0.1:$PORT" --dataset-name random --random-ids \
                --random-input-len "$ISL" --random-output-len "$OSL" --ignore-eos \
                --num-prompts $((4 * c > 16 ? 4 * c : 16)) \
                --max-concurrency "$c" --percentile-metrics ttft,tpot --metric-percentiles 50,99 --disable-tqdm \
                --save-result --result-dir "$OUT" --result-filename "$name-c$c-r$run.json"
        done
    done
    stop_server
done

# Every figure with its interval over the runs, as autotune validate prints them.
"$PYTHON" - "$OUT" "$CONCURRENCY" <<'PY'
import sys
from pathlib import Path

from autotune.validation.figures import estimates
from autotune.validation.loadgen import read_result

out, levels = Path(sys.argv[1]), [int(c) for c in sys.argv[2].split()]
print("| server | concurrency | output tok/s | TPOT p50 ms | TPOT p99 ms | TTFT p50 ms | TTFT p99 ms |")
print("|---|---|---|---|---|---|---|")
for name in ("schedule", "fixed", "none"):
    for c in levels:
        runs = [read_result(path) for path in sorted(out.glob(f"{name}-c{c}-r*.json"))]
        figures = estimates(runs, [])
        cells = [figures[k].describe(2) for k in ("output_tokens_per_s", "tpot_ms_p50", "tpot_ms_p99",
                                                   "ttft_ms_p50", "ttft_ms_p99")]
        print(f"| {name} | {c} | " + " | ".join(cells) + " |")
PY
