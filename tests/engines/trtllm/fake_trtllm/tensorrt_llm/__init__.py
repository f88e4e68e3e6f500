"""A CPU stand-in for TensorRT-LLM, for autotune's tests only: the tests put this folder on sys.path
so that the worker process imports it as ``tensorrt_llm`` (see llmapi/__init__.py)."""

from tensorrt_llm.llmapi import LLM, SamplingParams

__all__ = ["LLM", "SamplingParams"]
