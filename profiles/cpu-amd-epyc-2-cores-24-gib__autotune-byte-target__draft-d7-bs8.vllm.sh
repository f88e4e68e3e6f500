#!/usr/bin/env bash
# autotune 0.1.0 deployment profile 1, trial 30: draft@7 with draft autotune-byte-draft (be4fb5e46c19bf56fb55598020f11e42aa8d2f9151e4d15126a45bbc3e865185) at batch size 8
# target autotune-byte-target (ada46eb2709286e228090c07a995d1f3d6e55c58c60fa9096097f8750730fbb9) on cpu: AMD EPYC (2 cores, 24 GiB) (133641123fa9d94a)
# study 13364112-autotune-byte-target-builtin@v1 (embedded engine, objective throughput, workload builtin@v1)
# measured: 1388.0 tokens/s, TPOT p50 4.18 ms, 2.50x vs none
# vLLM's SpeculativeConfig (vllm/config/speculative.py); method 'mtp' needs a vLLM that knows it (older: 'deepseek_mtp').
# vLLM speculates at every batch size with the same draft length; autotune measured the best
# draft length per batch size as {1: 8, 2: 8, 4: 7, 8: 7} (0: speculation slower than none).
# Cap the batch size or run separate servers if the load sits where the draft length drops.
# NOTE: autotune-byte-target is autotune's built-in target (builtin:autotune-byte-target), not a checkpoint a serving engine can load: replace it with the path of an equivalent Hugging Face model.
# NOTE: autotune-byte-draft is autotune's built-in draft (builtin:autotune-byte-draft), not a checkpoint a serving engine can load: replace it with the path of an equivalent Hugging Face model.
set -euo pipefail
exec vllm serve autotune-byte-target \
  --max-num-seqs 8 \
  --max-num-batched-tokens 8192 \
  --speculative-config '{"method": "draft_model", "num_speculative_tokens": 8, "model": "autotune-byte-draft"}'
