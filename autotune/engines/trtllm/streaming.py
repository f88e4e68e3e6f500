"""How a TensorRT-LLM run keeps C requests in flight through the LLM API and times each streamed
request, for the steady-state harness (:mod:`autotune.analysis.steady`). Runs in the worker.

What it relies on, read in NVIDIA/TensorRT-LLM's sources (none of it run on a GPU yet: the smoke
script's first run checks it, docs/trtllm.md):

**C in flight.** ``trtllm-bench throughput --concurrency C`` (``LlmManager.process_request``,
``tensorrt_llm/bench/benchmark/utils/asynchronous.py`` at 89fd9b7) holds an ``asyncio.Semaphore(C)``
around each request: it takes the request's start time once it has a slot, right before
``llm.generate_async(..., streaming=True)``, reads the stream with ``async for`` and frees the slot
when the stream ends. ``trtllm-serve`` limits nothing itself: each HTTP request calls
``generate_async`` when it arrives (``OpenAIServer``, ``tensorrt_llm/serve/openai_server.py``), so
the concurrency is the load generator's (``--max-concurrency`` of its serving benchmark, or of
``vllm bench serve``). :func:`keep_in_flight` does what both amount to: the stream's requests in
order, at most C at a time, the next sent the moment one ends.

**Send.** ``generate_async`` only enqueues the request (``ExecutorRequestQueue._enqueue_impl``,
``tensorrt_llm/_torch/pyexecutor/executor_request_queue.py`` at a98a906); the executor takes it up
at the start of a later iteration, when fewer than ``max_batch_size`` requests are active. A
request is therefore *sent* when ``generate_async`` is called, as an HTTP client sends, and its
TTFT includes any wait in the engine's queue.

**A streamed request** (``GenerationResult`` in ``tensorrt_llm/executor/result.py`` at a678b91):
``async for`` yields the same result object once per executor response. A response carries the
tokens generated since the previous one (``LlmRequest::createResult``,
``cpp/tensorrt_llm/batch_manager/llmRequest.cpp`` at 119c6e6: none is sent without a new token
unless the request finished), and ``_handle_sequence`` *extends* ``outputs[0].token_ids`` with
them: ``token_ids`` (and ``length``) are cumulative, ``token_ids_diff`` is the chunk's new tokens
(1 + accepted draft tokens under speculation, all arriving at once), ``decoding_iter`` is the count
so far and ``finish_reason`` is set on the last chunk only. The executor answers every
``stream_interval`` iterations (default 1; ``PyExecutor._handle_responses``, ``py_executor.py`` at
9521caf). So each chunk's ``token_ids_diff`` arrived when the chunk was read, and a request
finishes with its last token. A stream whose chunks do not add up to the request's output (a
release that streams differently) is refused, never timed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from autotune.engines.failures import first_line
from autotune.engines.trtllm.stats import RequestRecord
from autotune.errors import EngineError, UnsupportedConfigError

T = TypeVar("T")


async def keep_in_flight(sends: Sequence[Callable[[], Awaitable[T]]], concurrency: int) -> list[T]:
    """Run ``sends`` in order with at most ``concurrency`` running, each started as soon as a
    running one ends; their results in order. When one fails, the others are cancelled."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    slots = asyncio.Semaphore(concurrency)  # waiters are served first come, first served

    async def one(send: Callable[[], Awaitable[T]]) -> T:
        async with slots:
            return await send()

    tasks = [asyncio.ensure_future(one(send)) for send in sends]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def stream_request(llm: Any, prompt: str, sampling_params: Any, start: float) -> RequestRecord:
    """Send one request to ``llm`` now and read its stream: send time, each token's arrival (its
    chunk's), finish (the last token's), in seconds since ``start`` (a ``time.perf_counter()``).
    A request ``generate_async`` refuses is UnsupportedConfigError; a stream whose chunks do not add
    up to its output is EngineError."""
    send_s = time.perf_counter() - start
    try:
        output = llm.generate_async(prompt, sampling_params=sampling_params, streaming=True)
    except ValueError as exc:  # _check_arguments: e.g. a prompt over max_num_tokens
        raise UnsupportedConfigError(f"TensorRT-LLM refused a request: {first_line(exc)}") from exc
    token_times: list[float] = []
    async for chunk in output:
        arrived = time.perf_counter() - start
        token_times += [arrived] * len(chunk.outputs[0].token_ids_diff)
    tokens = list(output.outputs[0].token_ids)
    if len(tokens) != len(token_times):
        raise EngineError(
            f"TensorRT-LLM streamed {len(token_times)} new tokens (token_ids_diff over the chunks) for a request "
            f"whose output has {len(tokens)}: this release streams otherwise than autotune reads it"
        )
    finish_s = token_times[-1] if token_times else time.perf_counter() - start
    return RequestRecord(tokens, send_s, token_times, finish_s, int(output.decoding_iter))
