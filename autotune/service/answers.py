"""Answers kept for a few seconds: the hot read of a team's server (``/v1/profiles/best``, asked by
every deployment pipeline) answered from memory rather than from ~9 database round trips and ~25 ms
of CPU each time (bench/bench_service.py; docs/benchmarks.md).

An answer is kept under the request's exact query string, fresh for ``max_age_s`` after it was
computed. The route computes it the first time (FastAPI has validated the parameters then); after
that :meth:`AnswerCache.middleware` answers the same query string before FastAPI parses anything,
which is most of what a request costs once the database is out of the way (about 0.6 of the 1.0 ms
of server CPU a request, profiled). The first request after ``max_age_s`` starts one recomputation
in the thread pool and, like every request meanwhile, gets the kept answer: a kept answer is at most
``max_age_s`` plus one recomputation old, and no request waits on the database except the first
for a query string (with every other request for it: one computation, not one per client). The
HTTP ``Age`` header says how old the answer is. Failures are never kept: a question that fails
(404, a lost database) fails for the requests waiting on it, and a failed recomputation drops the
kept answer so that the next request asks the database through the route.

Why a few seconds of staleness is fine here: a new profile comes from a tune that ran for minutes;
a pipeline sees it ``max_age_s`` later. ``autotune serve --answer-cache-s 0`` turns this off.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

# Distinct questions kept; the oldest used is dropped past this (a client cycling through names
# cannot grow the server's memory without bound).
MAX_ANSWERS = 1024
MEDIA_TYPE = b"application/json"


@dataclass
class _Answer:
    body: bytes
    computed_at: float  # time.monotonic()
    compute: Callable[[], bytes]  # how to recompute it (the route's validated question)


class AnswerCache:
    """Encoded answers by question, fresh for ``max_age_s`` seconds (0: nothing is kept). One event
    loop uses it (the server's); computations run in the thread pool, at most one per question."""

    def __init__(self, max_age_s: float, max_answers: int = MAX_ANSWERS) -> None:
        if max_age_s < 0:
            raise ValueError(f"max_age_s must be >= 0, got {max_age_s}")
        self.max_age_s = max_age_s
        self.max_answers = max_answers
        self._answers: OrderedDict[Hashable, _Answer] = OrderedDict()
        self._computing: dict[Hashable, asyncio.Future[_Answer]] = {}

    async def get(self, question: Hashable, compute: Callable[[], bytes]) -> tuple[bytes, float]:
        """The answer to ``question`` and its age in seconds; ``compute`` (blocking, run in the
        thread pool) makes a missing one, and is kept to remake it when it goes stale."""
        if self.max_age_s == 0:
            return await run_in_threadpool(compute), 0.0
        kept = self.kept(question)
        if kept is not None:
            return kept
        answer = await self._compute(question, compute)
        return answer.body, max(0.0, time.monotonic() - answer.computed_at)

    def kept(self, question: Hashable) -> tuple[bytes, float] | None:
        """The kept answer to ``question`` and its age, None when there is none; a stale one
        starts its recomputation in the background (and is answered meanwhile)."""
        stored = self._answers.get(question)
        if stored is None:
            return None
        self._answers.move_to_end(question)
        age = time.monotonic() - stored.computed_at
        if age >= self.max_age_s and question not in self._computing:
            self._compute(question, stored.compute).add_done_callback(_consume)
        return stored.body, max(0.0, age)

    def _compute(self, question: Hashable, compute: Callable[[], bytes]) -> asyncio.Future[_Answer]:
        """The computation of ``question``'s answer, started now unless one is running."""
        running = self._computing.get(question)
        if running is None:
            running = self._computing[question] = asyncio.ensure_future(self._run(question, compute))
        return asyncio.shield(running)  # a client that goes away does not cancel the others' answer

    async def _run(self, question: Hashable, compute: Callable[[], bytes]) -> _Answer:
        try:
            answer = _Answer(await run_in_threadpool(compute), time.monotonic(), compute)
        except BaseException:
            self._answers.pop(question, None)
            raise
        finally:
            self._computing.pop(question, None)
        self._answers[question] = answer
        self._answers.move_to_end(question)
        while len(self._answers) > self.max_answers:
            self._answers.popitem(last=False)
        return answer

    def middleware(self, path: str, route: Any) -> Callable[[ASGIApp], ASGIApp]:
        """An ASGI middleware that answers ``GET path`` from the kept answers, by the request's
        exact query string (the key the route stores under, :func:`question_of`), before the app
        parses anything; ``route`` is set as the request's route (for the metrics' label)."""
        def wrap(app: ASGIApp) -> ASGIApp:
            async def answering(scope: Scope, receive: Receive, send: Send) -> None:
                kept = (self.kept(question_of(scope)) if self.max_age_s and scope["type"] == "http"
                        and scope["method"] == "GET" and scope["path"] == path else None)
                if kept is None:
                    await app(scope, receive, send)
                    return
                body, age = kept
                scope["route"] = route
                await send({"type": "http.response.start", "status": 200, "headers": [
                    (b"content-type", MEDIA_TYPE), (b"content-length", str(len(body)).encode()),
                    (b"age", str(int(age)).encode())]})
                await send({"type": "http.response.body", "body": body})
            return answering
        return wrap


def question_of(scope: Scope) -> tuple[str, bytes]:
    """The key of a request's answer: its path and raw query string."""
    return scope["path"], scope.get("query_string", b"")


def _consume(future: asyncio.Future) -> None:
    """Read a background recomputation's outcome, so that a failure is not reported as never retrieved."""
    if not future.cancelled():
        future.exception()
