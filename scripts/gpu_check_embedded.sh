#!/usr/bin/env bash
# The checks of autotune that need an NVIDIA GPU but no TensorRT-LLM (for that, gpu_smoke_trtllm.sh):
#   1. `autotune probe` on the real GPU (NVML facts, copy bandwidth, matmul FLOP/s, launch overhead);
#   2. the embedded engine on CUDA: each method measured with --verify (greedy output token for token
#      equal to the target's own), then a draft measured with repeated rounds and its paired speedup;
#   3. `autotune tune` on defaults, which on a CUDA machine runs the embedded engine on the GPU, under
#      a wall-clock limit, then its trials and profile as JSON.
# Every step has its own timeout and writes its output to OUT (default gpu-check/); a failed step is
# reported and the next one still runs. Exit status: the number of failed steps.
#
#   bash scripts/gpu_check_embedded.sh [OUT]
#
# Needs autotune installed for python3 (pip install -e . --no-deps keeps a CUDA torch; PYTHONPATH=. alone
# lacks the migrations, which the wheel ships as autotune.migrations) and a CUDA build of torch.
set -u
OUT=${1:-gpu-check}
mkdir -p "$OUT"
DB="sqlite:///$(cd "$OUT" && pwd)/gpu.db"
failed=0

if ! command -v autotune >/dev/null; then  # not installed: a wrapper over the importable package
    mkdir -p "$OUT/bin"
    printf '#!/bin/sh\nexec python3 -c "import sys; from autotune.cli import main; sys.argv[0] = \\"autotune\\"; main()" "$@"\n' \
        >"$OUT/bin/autotune"
    chmod +x "$OUT/bin/autotune"
    PATH="$(cd "$OUT/bin" && pwd):$PATH"
fi

step() {  # step NAME SECONDS COMMAND...: run, keep stdout in OUT/NAME.out and stderr in OUT/NAME.err
    local name=$1 limit=$2 started
    shift 2
    started=$(date +%s)
    echo "== $name (limit ${limit}s): $*"
    timeout "$limit" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
    local code=$?
    echo "   exit $code after $(( $(date +%s) - started )) s"
    if [ $code -ne 0 ]; then
        failed=$((failed + 1))
        tail -n 5 "$OUT/$name.err"
    fi
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv | tee "$OUT/nvidia-smi.csv"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'

step probe 180 autotune probe --db "$DB" --json
for method in none ngram mtp draft; do
    depth=$([ $method = none ] && echo 0 || echo 3)
    step "verify-$method" 120 autotune measure --device cuda --method $method --depth "$depth" --concurrency 4 --verify --json
done
step measure-draft 120 autotune measure --device cuda --method draft --depth 4 --concurrency 16 --max-repetitions 5 --json
step tune 300 autotune tune --db "$DB" --study gpu --timeout 200 --seed 1
step trials 60 autotune trials gpu --db "$DB" --json
step profiles 60 autotune profiles list --db "$DB" --json
for name in probe verify-none verify-ngram verify-mtp verify-draft measure-draft tune trials profiles; do
    printf '\n##### %s\n' "$name"; cat "$OUT/$name.out"; tail -n 20 "$OUT/$name.err"
done >"$OUT/all.txt"  # one file with every step's output
cat "$OUT/tune.out"
echo "failed steps: $failed"
exit $failed
