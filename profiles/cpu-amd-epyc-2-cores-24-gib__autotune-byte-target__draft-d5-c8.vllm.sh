#!/usr/bin/env bash
# autotune 0.1.0 deployment profile 1, confirmation row 13: draft@5 with draft autotune-byte-draft (be4fb5e46c19bf56fb55598020f11e42aa8d2f9151e4d15126a45bbc3e865185) at concurrency 8
# target autotune-byte-target (ada46eb2709286e228090c07a995d1f3d6e55c58c60fa9096097f8750730fbb9) on cpu: AMD EPYC (2 cores, 24 GiB) (133641123fa9d94a)
# study 13364112-autotune-byte-target-builtin@v1 (embedded engine, objective throughput, workload builtin@v1)
# measured: 1119.6 tokens/s ±14.0 % (n=4), 1.55x [1.32, 1.82] vs none, TPOT p50 5.53 ms ±13.8 %, 95 % intervals
# within noise of draft@7, draft@8 at concurrency 8: draft@5 is the simplest of them to operate
# Flags and --speculative-config keys checked against vLLM 0.32.0 (vllm/engine/arg_utils.py,
# vllm/config/speculative.py); method 'mtp' needs a vLLM that knows it (older: 'deepseek_mtp').
# Arguments of this script go on to vllm serve, e.g. --host 127.0.0.1 --port 8000; a repeated flag wins.
# num_speculative_tokens_per_batch_size: [first, last concurrency (inclusive), draft length]; the
# draft length of each concurrency below holds up to the next one listed. Read in vLLM 0.32.0; a vLLM
# without the field refuses the key (extra fields are forbidden): delete it there.
# Measured per concurrency (depth to serve; speedup vs none, 95 % interval where confirmed):
#   concurrency 1: depth 6 (draft@6, 1.53x [1.31, 1.78], n=3; within noise of draft@7)
#   concurrency 2: depth 4 (draft@4, 1.79x [1.57, 2.03], n=3; within noise of draft@5, draft@7)
#   concurrency 4: depth 8 (draft@8, 2.08x [1.94, 2.23], n=7)
#   concurrency 8: depth 5 (draft@5, 1.55x [1.32, 1.82], n=4; within noise of draft@7, draft@8)
# NOTE: autotune-byte-target is autotune's built-in target (builtin:autotune-byte-target), not a checkpoint a serving engine can load: replace it with the path of an equivalent Hugging Face model.
# NOTE: autotune-byte-draft is autotune's built-in draft (builtin:autotune-byte-draft), not a checkpoint a serving engine can load: replace it with the path of an equivalent Hugging Face model.
set -euo pipefail
exec vllm serve autotune-byte-target \
  --max-num-seqs 8 \
  --max-num-batched-tokens 8192 \
  --speculative-config '{"method": "draft_model", "num_speculative_tokens": 8, "model": "autotune-byte-draft", "num_speculative_tokens_per_batch_size": [[1, 7, 8], [8, 8, 5]]}' \
  "$@"
