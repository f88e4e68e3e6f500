"""The stand-in streams and schedules as TensorRT-LLM does (issue 38, item 3), so that the runner's
tests can trust it: ``tensorrt_llm/executor/result.py`` chunks (cumulative ``token_ids``, the chunk's
new tokens in ``token_ids_diff``, several per chunk under speculation), at most ``max_batch_size``
requests active with the rest queued, and ``generate_async``'s refusals."""

from __future__ import annotations

import asyncio

import pytest

RELEASE = "1.2.0"


def read_chunks(llm, llmapi, prompt: str, max_tokens: int) -> list[tuple]:
    """(token_ids, token_ids_diff, length, finish_reason, decoding_iter, finished) after each chunk."""

    async def read() -> list[tuple]:
        output = llm.generate_async(prompt, llmapi.SamplingParams(max_tokens=max_tokens, top_k=1), streaming=True)
        seen = []
        async for chunk in output:
            assert chunk is output  # one result object, updated by every response
            out = chunk.outputs[0]
            seen.append((list(out.token_ids), list(out.token_ids_diff), out.length, out.finish_reason,
                         chunk.decoding_iter, chunk.finished))
        return seen

    return asyncio.run(read())


def test_a_streamed_result_is_cumulative_and_each_chunk_diffs_its_new_tokens(fake_release, target_dir) -> None:
    llmapi = fake_release(RELEASE)
    llm = llmapi.LLM(str(target_dir), speculative_config=llmapi.NGramDecodingConfig(max_draft_len=3))
    try:
        chunks = read_chunks(llm, llmapi, "def parse(argv):", 12)
    finally:
        llm.shutdown()
    previous: list[int] = []
    for index, (ids, diff, length, reason, decoding_iter, finished) in enumerate(chunks):
        assert diff and ids == previous + diff and length == len(ids)  # token_ids grows; the diff is what is new
        assert decoding_iter == index + 1  # the context step, then one generation step per chunk
        last = index == len(chunks) - 1
        assert (reason, finished) == (("length", True) if last else (None, False))  # set on the last chunk only
        previous = ids
    assert len(previous) == 12
    assert max(len(diff) for _, diff, *_ in chunks) > 1  # under speculation one chunk brings several tokens


def test_the_stand_in_activates_at_most_max_batch_size_and_queues_the_rest(fake_release, target_dir) -> None:
    llmapi = fake_release(RELEASE)
    llm = llmapi.LLM(str(target_dir), max_batch_size=2, enable_iter_perf_stats=True)

    async def over_submit() -> list[dict]:
        params = llmapi.SamplingParams(max_tokens=5, top_k=1)
        outputs = [llm.generate_async(f"prompt {i}", params, streaming=True) for i in range(5)]  # all at once
        await asyncio.gather(*(output.aresult() for output in outputs))
        return [stat async for stat in llm.get_stats_async(0.05)]

    try:
        stats = asyncio.run(over_submit())
    finally:
        llm.shutdown()
    batches = [s["inflightBatchingStats"]["numContextRequests"] + s["inflightBatchingStats"]["numGenRequests"]
               for s in stats]
    assert max(batches) == 2
    first, second, third = llm.engine.traces[:3]
    assert third.token_times_s[0] > min(first.finished_s, second.finished_s)  # queued until a slot freed


def test_the_stand_in_refuses_what_generate_async_refuses(fake_release, target_dir) -> None:
    llmapi = fake_release(RELEASE)

    def submit(llm, prompt: str) -> None:
        async def run() -> None:
            await llm.generate_async(prompt, llmapi.SamplingParams(max_tokens=2), streaming=True).aresult()

        asyncio.run(run())

    llm = llmapi.LLM(str(target_dir), max_num_tokens=16)
    submit(llm, "x" * 16)
    with pytest.raises(ValueError, match=r"prompt length \(17.0\).*should not exceed max_num_tokens \(16\)"):
        submit(llm, "x" * 17)
    llm.shutdown()
    with pytest.raises(RuntimeError, match="LLM is shutting down"):
        submit(llm, "x")
    chunked = llmapi.LLM(str(target_dir), max_num_tokens=16, enable_chunked_prefill=True)
    try:
        submit(chunked, "x" * 17)  # a prompt over max_num_tokens is chunked, not refused
    finally:
        chunked.shutdown()
