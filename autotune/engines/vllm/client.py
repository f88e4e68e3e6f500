"""Our load generator: a request stream against a ``vllm serve``'s ``/v1/completions``, C requests in
flight, every token timed as it reaches the client: what a study measures (:class:`~autotune.engines.
vllm.runner.VllmRunner`) and what ``autotune validate`` serves, each run a list of
:class:`~autotune.analysis.steady.RequestResult` whose figures :mod:`autotune.analysis.steady` computes.

Why ours and not ``vllm bench serve``: with speculation one streamed chunk carries several tokens, and
``vllm bench serve --save-detailed`` keeps per request only its chunk gaps (``itls``) and its length,
so which tokens arrived inside the steady window is unknown; each of its runs is a process that
imports vLLM (10-20 s on two cores); and it sends one temperature for every request. Here every
chunk's ``token_ids`` (vLLM's ``return_token_ids``, ``vllm/entrypoints/openai/completion/protocol.py``,
0.32.0) give the exact tokens and their arrival time; each request keeps its own ``max_tokens`` and
temperature, and a seed per stream position (as the embedded engine seeds it); EOS ends a request
unless ``ignore_eos`` (step-cost timing) says otherwise. The next request goes out the moment one
finishes (``vllm bench serve --max-concurrency C --request-rate inf``).

The client is stdlib asyncio (HTTP/1.1, one connection per request, the server's chunked
server-sent events read as they come): autotune's own venv needs no HTTP package for it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from autotune.analysis.steady import RequestResult
from autotune.errors import EngineError
from autotune.workload import Workload

ROUTE = "/v1/completions"
WATCH_S = 0.5  # how often a run checks that its server still lives
DEATH_GRACE_S = 2.0  # how long a failed request waits to learn whether its server died


def completion_bodies(workload: Workload, model: str, seed: int = 0, temperature: float | None = None,
                      ignore_eos: bool = False) -> list[dict[str, Any]]:
    """One streamed completion request per request of ``workload``, at its own temperature unless
    ``temperature`` is given; a sampled one (temperature > 0) seeded ``seed + i`` at stream position i,
    as the embedded engine seeds it (a greedy one unseeded: vLLM would keep a generator for it)."""
    bodies = []
    for index, request in enumerate(workload.requests):
        heat = request.temperature if temperature is None else temperature
        bodies.append({"model": model, "prompt": request.prompt, "max_tokens": request.max_tokens, "temperature": heat,
                       **({"seed": seed + index} if heat > 0 else {}), "ignore_eos": ignore_eos, "stream": True,
                       "return_token_ids": True})
    return bodies


async def run_stream(host: str, port: int, bodies: Sequence[dict[str, Any]], concurrency: int,
                     alive: Callable[[], None] | None = None, start: float | None = None) -> list[RequestResult]:
    """Send ``bodies`` to ``host:port`` with ``concurrency`` in flight, the next the moment one finishes;
    one :class:`RequestResult` per body, in order, times in seconds since ``start`` (a
    ``time.perf_counter`` reading; default: now). ``alive`` is called every :data:`WATCH_S` seconds
    while the run lasts and stops it by raising (a server that died). EngineError when a request fails;
    when ``alive`` then says the server died (within :data:`DEATH_GRACE_S`), that death instead: a
    killed server's connections break before its exit is seen."""
    start = time.perf_counter() if start is None else start
    results: list[RequestResult | None] = [None] * len(bodies)
    queue = iter(enumerate(bodies))  # shared: a free client takes the next
    clients = min(concurrency, len(bodies))
    done = asyncio.Event()

    async def client() -> None:
        nonlocal clients
        try:
            for index, body in queue:
                results[index] = await _one(host, port, body, start)
        finally:
            clients -= 1
            if not clients:
                done.set()

    async def watch(check: Callable[[], None]) -> None:
        while not done.is_set():
            check()
            try:
                await asyncio.wait_for(done.wait(), WATCH_S)
            except TimeoutError:
                pass

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(clients):
                group.create_task(client())
            if alive is not None:
                group.create_task(watch(alive))
    except* EngineError as errors:
        if alive is not None:
            await _blame_death(alive)
        raise errors.exceptions[0] from None
    return [result for result in results if result is not None]


async def _blame_death(alive: Callable[[], None]) -> None:
    """Give ``alive`` :data:`DEATH_GRACE_S` to raise the server's death."""
    deadline = time.monotonic() + DEATH_GRACE_S
    while time.monotonic() < deadline:
        alive()
        await asyncio.sleep(0.1)


async def _one(host: str, port: int, body: dict[str, Any], start: float) -> RequestResult:
    sent = time.perf_counter() - start
    tokens: list[int] = []
    times: list[float] = []
    async for event in _post_events(host, port, ROUTE, body):
        now = time.perf_counter() - start
        for choice in event.get("choices") or []:
            new = choice.get("token_ids") or []
            tokens.extend(int(token) for token in new)
            times.extend([now] * len(new))
    return RequestResult(tokens, sent, times, times[-1] if times else time.perf_counter() - start)


async def _post_events(host: str, port: int, route: str, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """POST ``body`` as JSON and yield the server-sent events of the streamed answer, each as it arrives."""
    writer = None
    try:
        reader, writer = await asyncio.open_connection(host, port)
        payload = json.dumps(body).encode()
        writer.write(f"POST {route} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload)
        await writer.drain()
        status, headers = await _head(reader)
        chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        if status != 200:
            text = (await _body(reader, chunked)).decode(errors="replace").strip()
            raise EngineError(f"the server answered {route} with {status}: {text[:300]}")
        buffer = b""
        async for data in _chunks(reader, chunked):
            buffer += data
            *events, buffer = buffer.split(b"\n\n")
            for event in events:
                parsed = _event(event)
                if parsed is not None:
                    yield parsed
    except (OSError, asyncio.IncompleteReadError) as exc:
        raise EngineError(f"the connection to the server broke during {route} ({exc or type(exc).__name__})") from None
    finally:
        if writer is not None:
            writer.close()


async def _head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status_line = await reader.readline()
    if not status_line:
        raise EngineError("the server closed the connection without answering")
    status = int(status_line.split()[1])
    headers = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


async def _chunks(reader: asyncio.StreamReader, chunked: bool) -> AsyncIterator[bytes]:
    """The body as it arrives: the chunks of a chunked body, else what each read returns until EOF."""
    if not chunked:
        while data := await reader.read(65536):
            yield data
        return
    while True:
        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readline()  # the empty trailer
            return
        yield await reader.readexactly(size)
        await reader.readexactly(2)  # the chunk's CRLF


async def _body(reader: asyncio.StreamReader, chunked: bool) -> bytes:
    return b"".join([data async for data in _chunks(reader, chunked)])


def _event(event: bytes) -> dict[str, Any] | None:
    """The JSON of one ``data:`` event; None for ``[DONE]`` and anything else."""
    for line in event.splitlines():
        if line.startswith(b"data:"):
            data = line[5:].strip()
            if data and data != b"[DONE]":
                return json.loads(data)
    return None
