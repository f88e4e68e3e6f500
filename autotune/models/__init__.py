"""Model conversions: the embedded engine's models in other ecosystems' formats.

:mod:`autotune.models.hf_export` writes the built-in byte-level models as Hugging Face Llama
checkpoints (config, safetensors weights, tokenizer) that ``transformers`` and vLLM load.
"""
