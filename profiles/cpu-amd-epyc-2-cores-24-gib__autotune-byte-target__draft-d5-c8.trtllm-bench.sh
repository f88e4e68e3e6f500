#!/usr/bin/env bash
# autotune 0.1.0 deployment profile 1, confirmation row 13: draft@5 with draft autotune-byte-draft (be4fb5e46c19bf56fb55598020f11e42aa8d2f9151e4d15126a45bbc3e865185) at concurrency 8
# target autotune-byte-target (ada46eb2709286e228090c07a995d1f3d6e55c58c60fa9096097f8750730fbb9) on cpu: AMD EPYC (2 cores, 24 GiB) (133641123fa9d94a)
# study 13364112-autotune-byte-target-builtin@v1 (embedded engine, objective throughput, workload builtin@v1)
# measured: 1119.6 tokens/s ±14.0 % (n=4), 1.55x [1.32, 1.82] vs none, TPOT p50 5.53 ms ±13.8 %, 95 % intervals
# within noise of draft@7, draft@8 at concurrency 8: draft@5 is the simplest of them to operate
# Re-measures the profile at concurrency 8 with trtllm-bench (TensorRT-LLM, PyTorch backend).
# DATASET: a trtllm-bench dataset, one JSON object per line:
#   {"task_id": 0, "prompt": "...", "output_tokens": 128}  (from an autotune workload: prompt, max_tokens)
# Compare the report's per-user output speed and token throughput with the figures above.
# The YAML below is written for TensorRT-LLM 1.2 (autotune export --trtllm-version).
# NOTE: autotune-byte-target is autotune's built-in target (builtin:autotune-byte-target), not a checkpoint a serving engine can load: replace it with the path of an equivalent Hugging Face model.
# NOTE: autotune-byte-draft is autotune's built-in draft (builtin:autotune-byte-draft), not a checkpoint a serving engine can load: replace it with the path of an equivalent Hugging Face model.
set -euo pipefail
: "${DATASET:?set DATASET to a trtllm-bench dataset file (see above)}"
REPORT_JSON="${REPORT_JSON:-trtllm-bench-autotune-byte-target-draft-d5-c8.json}"
CONFIG="$(mktemp --suffix=.yaml)"
trap 'rm -f "$CONFIG"' EXIT
cat > "$CONFIG" <<'YAML'
max_batch_size: 8
max_num_tokens: 8192
kv_cache_config:
  free_gpu_memory_fraction: 0.8
  enable_block_reuse: false
cuda_graph_config:
  enable_padding: true
  batch_sizes:
  - 1
  - 2
  - 4
  - 8
  max_batch_size: 8
speculative_config:
  decoding_type: Draft_Target
  max_draft_len: 8
  speculative_model_dir: autotune-byte-draft
  draft_len_schedule:
    1: 8
    2: 8
    4: 8
    8: 5
YAML
trtllm-bench --model autotune-byte-target \
  throughput \
  --backend pytorch \
  --dataset "$DATASET" \
  --extra_llm_api_options "$CONFIG" \
  --max_batch_size 8 \
  --concurrency 8 \
  --streaming \
  --report_json "$REPORT_JSON"
