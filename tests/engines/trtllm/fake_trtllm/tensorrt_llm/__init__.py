"""A CPU stand-in for TensorRT-LLM, for autotune's tests only: the tests put this folder on sys.path
so that the worker process imports it as ``tensorrt_llm`` (see llmapi/__init__.py)."""

import os

# The release it behaves as (llmapi.line() picks the rules of its line): a 1.x release, whose
# tensorrt_llm.LLM is the PyTorch backend (decoding_iter counts the context step). FAKE_TRTLLM_VERSION
# overrides it. Set before llmapi is imported, which reads it while defining its classes.
__version__ = os.environ.get("FAKE_TRTLLM_VERSION", "1.2.0")

from tensorrt_llm.llmapi import LLM, SamplingParams  # noqa: E402

__all__ = ["LLM", "SamplingParams", "__version__"]
