"""Our load generator (autotune.engines.vllm.client) against vLLM's own answers: vllm serve 0.32.0's raw
HTTP responses, recorded byte for byte (data/vllm_completion_stream.http: a streamed completion of the
built-in target with the built-in draft speculating at depth 3, so chunks carry several tokens;
data/vllm_completion_unknown_model.http: its 404), replayed by a local server one chunk at a time.
Also: the request bodies of a stream, and a run stopped at once when its server dies."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import pytest

from autotune.analysis.steady import request_stream
from autotune.engines.vllm.client import completion_bodies, run_stream
from autotune.engines.vllm.server import free_port
from autotune.errors import EngineError
from autotune.workload import Request, Workload

DATA = Path(__file__).parent / "data"
STREAM = (DATA / "vllm_completion_stream.http").read_bytes()
NOT_FOUND = (DATA / "vllm_completion_unknown_model.http").read_bytes()
CHUNK_GAP_S = 0.01


def recorded_tokens() -> list[list[int]]:
    """The token ids of each event of the recorded stream, as vLLM sent them."""
    head, body = STREAM.split(b"\r\n\r\n", 1)
    ids = [json.loads(data)["choices"][0].get("token_ids") or []
           for data in re.findall(rb"data: (\{.*?\})\n\n", body.replace(b"\r\n", b"\n"))]
    return [group for group in ids if group]


class Replay:
    """A local server that answers every request with one recorded response, a piece at a time (the
    head, then each piece of the chunked body), counting the connections it holds at once."""

    def __init__(self, response: bytes) -> None:
        head, body = response.split(b"\r\n\r\n", 1)
        self.pieces = [head + b"\r\n\r\n", *re.split(rb"(?<=\r\n)(?=[0-9a-f]+\r\n)", body)]
        self.open = self.most = self.served = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        self.most = max(self.most, self.open)
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
        self.body = json.loads(await reader.readexactly(length))
        for piece in self.pieces:
            await asyncio.sleep(CHUNK_GAP_S)
            writer.write(piece)
            await writer.drain()
        self.open -= 1
        self.served += 1
        writer.close()


async def replayed(response: bytes, bodies: list[dict], concurrency: int, alive=None):  # noqa: ANN001, ANN201
    replay = Replay(response)
    server = await asyncio.start_server(replay.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        results = await run_stream("127.0.0.1", port, bodies, concurrency, alive)
    return replay, results


BODIES = [{"model": "m", "prompt": "p", "stream": True} for _ in range(6)]


def test_every_token_vllm_streamed_is_counted_and_timed_with_its_chunk() -> None:
    replay, results = asyncio.run(replayed(STREAM, BODIES, 2))
    expected = recorded_tokens()
    assert any(len(group) > 1 for group in expected)  # speculation: chunks of several tokens
    assert replay.served == 6 and replay.most == 2  # the concurrency held, never more
    for result in results:
        assert result.tokens == [token for group in expected for token in group]
        chunk_times = sorted(set(result.token_times_s))
        assert len(chunk_times) == len(expected)  # one arrival time per chunk, shared by its tokens
        assert result.send_s <= result.token_times_s[0] and result.finish_s == result.token_times_s[-1]
    # the next request went out the moment a slot freed: sends after the first two follow finishes
    sends = sorted(r.send_s for r in results)
    finishes = sorted(r.finish_s for r in results)
    assert all(send >= finish - 1e-3 for send, finish in zip(sends[2:], finishes))


def test_a_refused_request_is_one_line_with_the_servers_answer() -> None:
    with pytest.raises(EngineError) as error:
        asyncio.run(replayed(NOT_FOUND, BODIES[:1], 1))
    message = str(error.value)
    assert message.startswith("the server answered /v1/completions with 404: ") and "no-such-model" in message
    assert "\n" not in message


def test_nothing_listening_is_one_line() -> None:
    with pytest.raises(EngineError, match="the connection to the server broke during /v1/completions"):
        asyncio.run(run_stream("127.0.0.1", free_port(), BODIES[:1], 1))


def test_a_run_stops_within_a_watch_period_when_its_server_dies() -> None:
    started = time.monotonic()
    calls = []

    def alive() -> None:
        calls.append(time.monotonic())
        if len(calls) == 2:
            raise EngineError("the schedule server (draft@2) died: killed by SIGKILL")

    slow = [{"model": "m"}] * 200  # 200 requests of ~0.3 s each at concurrency 1: a minute
    with pytest.raises(EngineError, match="killed by SIGKILL"):
        asyncio.run(replayed(STREAM, slow, 1, alive))
    assert time.monotonic() - started < 3


def test_the_bodies_of_a_stream_keep_each_requests_own_settings() -> None:
    workload = Workload("w", (Request("a", 5, 0.0), Request("b", 7, 0.8)))
    bodies = completion_bodies(request_stream(workload, 2), "/models/target", seed=3)
    assert [(b["prompt"], b["max_tokens"], b["temperature"], b.get("seed")) for b in bodies] == [
        ("a", 5, 0.0, None), ("b", 7, 0.8, 4), ("a", 5, 0.0, None), ("b", 7, 0.8, 6),
        ("a", 5, 0.0, None), ("b", 7, 0.8, 8), ("a", 5, 0.0, None), ("b", 7, 0.8, 10)]  # seeded where sampled
    assert all(b["stream"] and b["return_token_ids"] and not b["ignore_eos"] for b in bodies)
    assert all(b["model"] == "/models/target" for b in bodies)
    timing = completion_bodies(workload, "m", temperature=0.0, ignore_eos=True)  # step-cost timing's rows
    assert [(b["temperature"], b["ignore_eos"]) for b in timing] == [(0.0, True), (0.0, True)]


def test_a_request_broken_by_a_dying_server_reports_the_death() -> None:
    deaths = iter([None, None, EngineError("the schedule server (draft@2) died: killed by SIGKILL")])

    def alive() -> None:
        death = next(deaths, None)
        if death is not None:
            raise death

    with pytest.raises(EngineError, match="died: killed by SIGKILL"):  # not "the connection broke"
        asyncio.run(run_stream("127.0.0.1", free_port(), BODIES[:1], 1, alive))
