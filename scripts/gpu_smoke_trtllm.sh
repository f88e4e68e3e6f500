#!/usr/bin/env bash
# Smoke tuning of autotune's TensorRT-LLM engine on a real NVIDIA GPU (see docs/trtllm.md).
#
#   scripts/gpu_smoke_trtllm.sh TARGET_DIR [DRAFT_DIR ...]
#
# TARGET_DIR / DRAFT_DIR: Hugging Face model folders (config.json, tokenizer, *.safetensors), e.g. a
# small Llama-3.2-1B-Instruct target with no draft, or Llama-3.1-8B-Instruct with Llama-3.2-1B-Instruct.
# Environment: PYTHON (default python3), OUT (default ./trtllm-smoke), BATCH_SIZES (default "1 4"),
# DEPTH (default 3), N_TRIALS (default 6; the CLI tuning step).
#
# Steps: 1. GPU and TensorRT-LLM present; 2. probe + preflight + a small measured grid through the
# library (scripts/gpu_smoke_trtllm.py: checks LLM reuse, decoding_iter semantics, counted drafts);
# 3. a few-trial `autotune tune --engine trtllm` into $OUT/autotune.db.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    sed -n '2,12p' "$0"
    exit 64
fi
TARGET=$1
shift
PYTHON=${PYTHON:-python3}
OUT=${OUT:-trtllm-smoke}
BATCH_SIZES=${BATCH_SIZES:-1 4}
DEPTH=${DEPTH:-3}
N_TRIALS=${N_TRIALS:-6}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"

echo "== 1. GPU and TensorRT-LLM"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.csv"
"$PYTHON" -c "import tensorrt_llm; print('TensorRT-LLM', tensorrt_llm.__version__)" | tee "$OUT/tensorrt_llm_version.txt"

echo "== 2. probe, preflight and a measured grid"
draft_args=()
for draft in "$@"; do
    draft_args+=(--draft "$draft")
done
# shellcheck disable=SC2086  # BATCH_SIZES is a list of numbers
"$PYTHON" "$HERE/gpu_smoke_trtllm.py" --target "$TARGET" ${draft_args[@]+"${draft_args[@]}"} --out "$OUT" \
    --batch-sizes $BATCH_SIZES --depth "$DEPTH" 2>&1 | tee "$OUT/grid.log"

echo "== 3. tuning through the CLI"
cli_drafts=()
for draft in "$@"; do
    cli_drafts+=(--draft "$draft")
done
autotune tune --engine trtllm --target "$TARGET" ${cli_drafts[@]+"${cli_drafts[@]}"} --trials "$N_TRIALS" \
    --batch-sizes "${BATCH_SIZES// /,}" --max-depth "$DEPTH" --study trtllm-smoke \
    --db "sqlite:///$PWD/$OUT/autotune.db" 2>&1 | tee "$OUT/tune.log"
echo "== done: $OUT"
