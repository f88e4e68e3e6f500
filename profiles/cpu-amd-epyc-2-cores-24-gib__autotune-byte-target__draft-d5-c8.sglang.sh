#!/usr/bin/env bash
# autotune 0.1.0 deployment profile 1, confirmation row 13: draft@5 with draft autotune-byte-draft (be4fb5e46c19bf56fb55598020f11e42aa8d2f9151e4d15126a45bbc3e865185) at concurrency 8
# target autotune-byte-target (ada46eb2709286e228090c07a995d1f3d6e55c58c60fa9096097f8750730fbb9) on cpu: AMD EPYC (2 cores, 24 GiB) (133641123fa9d94a)
# study 13364112-autotune-byte-target-builtin@v1 (embedded engine, objective throughput, workload builtin@v1)
# measured: 1119.6 tokens/s ±14.0 % (n=4), 1.55x [1.32, 1.82] vs none, TPOT p50 5.53 ms ±13.8 %, 95 % intervals
# within noise of draft@7, draft@8 at concurrency 8: draft@5 is the simplest of them to operate
# STANDALONE (a separate draft model) needs SGLang >= 0.5.
# SGLang speculates at every concurrency with the same draft length; autotune measured the best
# draft length per concurrency as {1: 8, 2: 8, 4: 8, 8: 5} (0: speculation did not beat none).
# Cap the concurrency or run separate servers if the load sits where the draft length drops.
# Measured per concurrency (depth to serve; speedup vs none, 95 % interval where confirmed):
#   concurrency 1: depth 6 (draft@6, 1.53x [1.31, 1.78], n=3; within noise of draft@7)
#   concurrency 2: depth 4 (draft@4, 1.79x [1.57, 2.03], n=3; within noise of draft@5, draft@7)
#   concurrency 4: depth 8 (draft@8, 2.08x [1.94, 2.23], n=7)
#   concurrency 8: depth 5 (draft@5, 1.55x [1.32, 1.82], n=4; within noise of draft@7, draft@8)
# NOTE: autotune-byte-target is autotune's built-in target (builtin:autotune-byte-target), not a checkpoint a serving engine can load: replace it with the path of an equivalent Hugging Face model.
# NOTE: autotune-byte-draft is autotune's built-in draft (builtin:autotune-byte-draft), not a checkpoint a serving engine can load: replace it with the path of an equivalent Hugging Face model.
set -euo pipefail
exec python -m sglang.launch_server \
  --model-path autotune-byte-target \
  --max-running-requests 8 \
  --cuda-graph-max-bs 8 \
  --speculative-algorithm STANDALONE \
  --speculative-num-steps 8 \
  --speculative-eagle-topk 1 \
  --speculative-num-draft-tokens 9 \
  --speculative-draft-model-path autotune-byte-draft \
  "$@"
