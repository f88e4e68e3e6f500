"""A CPU stand-in for TensorRT-LLM, for autotune's tests only: the tests put this folder on sys.path
so that the worker process imports it as ``tensorrt_llm`` (see llmapi/__init__.py)."""

import os

from tensorrt_llm.llmapi import LLM, SamplingParams

# The release it behaves as: a 1.x release, whose tensorrt_llm.LLM is the PyTorch backend (see
# llmapi: decoding_iter counts the context step). FAKE_TRTLLM_VERSION overrides it.
__version__ = os.environ.get("FAKE_TRTLLM_VERSION", "1.2.0")

__all__ = ["LLM", "SamplingParams", "__version__"]
