"""What ``LLM.generate_async`` returns and what ``get_stats_async`` iterates, as the real
``tensorrt_llm/executor/result.py`` has them (NVIDIA/TensorRT-LLM, read at a678b91 and at the older
005bc84; the same in both):

* ``GenerationResult.__anext__`` handles exactly **one** executor response per step and returns the
  result itself (one object, mutated), so ``async for chunk in result`` sees one chunk per response;
* a streamed response carries only the tokens generated since the previous one
  (``LlmRequest::createResult``: ``maxNbTokens - getMaxSentTokenLen()``, and no response at all
  unless there is a new token or the request finished; ``cpp/tensorrt_llm/batch_manager/
  llmRequest.cpp`` at 119c6e6). ``_handle_sequence`` sets ``_last_token_ids_len`` to the old length
  and *extends* ``token_ids``: ``token_ids`` and ``length`` are cumulative, ``token_ids_diff`` is the
  chunk's new tokens (several under speculation: 1 + accepted in one step);
* ``decoding_iter`` is copied from every response (the count so far); ``finish_reason`` is set only
  on the final response (``if self._done``); ``finished`` is that response's ``is_final``;
* ``IterationResult`` (``get_stats_async``) stops after ``timeout`` seconds without a new iteration
  and resumes when ``mark_undone`` is called on a new submission.
"""

from __future__ import annotations

import asyncio
from typing import Any, NamedTuple


class Response(NamedTuple):
    """One executor response of a streamed request: the tokens since the previous response."""

    new_tokens: list[int]
    decoding_iter: int
    is_final: bool
    finish_reason: str | None


class CompletionOutput:
    """One sequence of a result: cumulative ``token_ids``; ``token_ids_diff``: the last chunk's."""

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.text = ""
        self.token_ids: list[int] = []
        self.finish_reason: str | None = None
        self._last_token_ids_len = 0

    @property
    def length(self) -> int:
        return len(self.token_ids)

    @property
    def token_ids_diff(self) -> list[int]:
        return self.token_ids[self._last_token_ids_len:]


class GenerationResult:
    """A submitted request's result, fed one :class:`Response` at a time by the engine."""

    def __init__(self, request_id: int, prompt_token_ids: list[int], sampling_params: Any, streaming: bool) -> None:
        self.request_id = request_id
        self.prompt_token_ids = prompt_token_ids
        self.sampling_params = sampling_params
        self.decoding_iter = 0
        self._streaming = streaming
        self._done = False
        self._outputs = [CompletionOutput(0)]
        self._responses: asyncio.Queue[Response] = asyncio.Queue()

    @property
    def outputs(self) -> list[CompletionOutput]:
        return self._outputs

    @property
    def finished(self) -> bool:
        return self._done

    def put(self, response: Response) -> None:
        """The engine's side: queue a response for the reader."""
        self._responses.put_nowait(response)

    def _handle_response(self, response: Response) -> None:
        output = self._outputs[0]
        output._last_token_ids_len = len(output.token_ids)
        output.token_ids.extend(response.new_tokens)
        self.decoding_iter = response.decoding_iter
        self._done = response.is_final
        if self._done:
            output.finish_reason = response.finish_reason

    async def aresult(self) -> GenerationResult:
        while not self._done:
            self._handle_response(await self._responses.get())
        return self

    def __aiter__(self) -> GenerationResult:
        return self

    async def __anext__(self) -> GenerationResult:
        if self._done:
            raise StopAsyncIteration
        self._handle_response(await self._responses.get())
        return self


class IterationResult:
    """``get_stats_async``'s iterable: the iteration dicts as they come, until ``timeout`` passes
    without one."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue = asyncio.Queue()
        self._done = False
        self._timeout = 2.0

    def set_timeout(self, timeout: float) -> None:
        self._timeout = timeout

    def mark_undone(self) -> None:
        self._done = False

    def put(self, stat: dict[str, Any]) -> None:
        self._queue.put_nowait(stat)

    def __aiter__(self) -> IterationResult:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if self._done:
            raise StopAsyncIteration
        try:
            return await asyncio.wait_for(self._queue.get(), self._timeout)
        except asyncio.TimeoutError:
            self._done = True
            raise StopAsyncIteration from None


class NoStats:
    """``get_stats_async`` before anything was submitted: nothing to iterate."""

    def __aiter__(self) -> NoStats:
        return self

    async def __anext__(self) -> None:
        raise StopAsyncIteration
