#!/usr/bin/env bash
# Smoke test of autotune's TensorRT-LLM engine on a real NVIDIA GPU: the points of issue 13 first,
# then a short tuning run whose profiles are exported and loaded again (see docs/trtllm.md).
#
#   scripts/gpu_smoke_trtllm.sh TARGET_DIR [DRAFT_DIR ...]
#
# TARGET_DIR / DRAFT_DIR: Hugging Face model folders (config.json, tokenizer, *.safetensors), e.g. a
# small target with MTP modules, or Llama-3.1-8B-Instruct with Llama-3.2-1B-Instruct and an EAGLE-3 head.
# Environment: PYTHON (default python3), OUT (default ./trtllm-smoke), CONCURRENCIES (default "1 4"; two
# or more for the rebuild check), DEPTH (default 3), N_TRIALS (default 6; the tuning step).
#
# Steps: 1. GPU and TensorRT-LLM present; 2. the issue's points through the library
# (scripts/gpu_smoke_trtllm.py: step count, sampling at temperature > 0, stats per method, each YAML
# through trtllm-serve and trtllm-bench, rebuild with memory freed, step costs at forced acceptance,
# C requests kept in flight over each measurement's steady window);
# 3. a few-trial `autotune tune --engine trtllm` into $OUT/autotune.db (model-guided by default: it
# times step costs at forced acceptance first, through the tuner); 4. every stored profile
# exported for the installed version and loaded through trtllm-serve and trtllm-bench; 5. the study's
# profile validated under load (scripts/validate_trtllm.sh: schedule, best fixed depth and none through
# trtllm-serve and TensorRT-LLM's serving benchmark client; unrun so far, docs/validation.md).
# The markdown tables of steps 2 and 4 ($OUT/table.md, $OUT/exports/table.md) paste into docs/trtllm.md.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    sed -n '2,20p' "$0"
    exit 64
fi
TARGET=$1
shift
PYTHON=${PYTHON:-python3}
OUT=${OUT:-trtllm-smoke}
CONCURRENCIES=${CONCURRENCIES:-1 4}
DEPTH=${DEPTH:-3}
N_TRIALS=${N_TRIALS:-6}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
draft_args=()
for draft in "$@"; do
    draft_args+=(--draft "$draft")
done

echo "== 1. GPU and TensorRT-LLM"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.csv"
"$PYTHON" -c "import tensorrt_llm; print('TensorRT-LLM', tensorrt_llm.__version__)" | tee "$OUT/tensorrt_llm_version.txt"

echo "== 2. the issue's points"
status=0
# shellcheck disable=SC2086  # CONCURRENCIES is a list of numbers
"$PYTHON" "$HERE/gpu_smoke_trtllm.py" --target "$TARGET" ${draft_args[@]+"${draft_args[@]}"} --out "$OUT" \
    --concurrency $CONCURRENCIES --depth "$DEPTH" 2>&1 | tee "$OUT/checks.log" || status=1

echo "== 3. tuning through the CLI"
DB="sqlite:///$PWD/$OUT/autotune.db"
autotune tune --engine trtllm --target "$TARGET" ${draft_args[@]+"${draft_args[@]}"} --trials "$N_TRIALS" \
    --concurrency "${CONCURRENCIES// /,}" --max-depth "$DEPTH" --study trtllm-smoke --db "$DB" 2>&1 | tee "$OUT/tune.log"

echo "== 4. exported profiles through trtllm-serve and trtllm-bench"
"$PYTHON" "$HERE/gpu_smoke_trtllm.py" --target "$TARGET" --out "$OUT/exports" --skip-engine --export-db "$DB" \
    2>&1 | tee "$OUT/exports.log" || status=1

echo "== 5. the profile served under load (autotune validate's TensorRT-LLM counterpart)"
profile=$(autotune profiles list --study trtllm-smoke --json --db "$DB" | "$PYTHON" -c \
    'import json, sys; print(json.load(sys.stdin)[0]["id"])')
OUT="$OUT/validate" CONCURRENCY="$CONCURRENCIES" RUNS=${RUNS:-3} PYTHON="$PYTHON" \
    bash "$HERE/validate_trtllm.sh" "$DB" "$profile" "$TARGET" 2>&1 | tee "$OUT/validate.log" || status=1
echo "== done: $OUT/table.md and $OUT/exports/table.md (exit $status)"
exit "$status"
