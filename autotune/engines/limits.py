"""Engine-neutral defaults that every engine and every export is given alike, so that what one engine
measured and what another serves propose and batch the same way. Pure constants: no engine imported.
"""

from __future__ import annotations

# Tokens one engine step may hold (prefill chunks and the 1 + depth verified tokens of each sequence):
# TensorRT-LLM's own default (``BaseLlmArgs.max_num_tokens`` in ``tensorrt_llm/llmapi/llm_args.py``),
# given to vLLM as ``max_num_batched_tokens`` too, whose default depends on the usage context. An
# engine raises it to ``max_batch_size * (1 + depth)`` where that is larger.
DEFAULT_MAX_NUM_TOKENS = 8192
# The longest n-gram the n-gram proposer matches: the embedded engine's prompt-lookup window
# (:mod:`autotune.engines.embedded.ngram`), written as TensorRT-LLM's ``max_matching_ngram_size`` and
# vLLM's ``prompt_lookup_max`` so that every engine proposes alike.
DEFAULT_MAX_NGRAM = 3
