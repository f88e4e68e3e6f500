"""Best-profile answers kept a few seconds (autotune/service/answers.py): one computation per
question however many clients ask, stale answers served while one recomputation runs, failures
never kept; and on a live server, a profile stored later is answered once the kept answer is old."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

import profile_factory as factory
from autotune.service.answers import AnswerCache
from autotune.store import open_database
from service_support import fill, live_server


TARGET = ("tiny-target", "tttt000011112222")  # as profile_factory.populate stores it


class Computation:
    """A blocking computation that counts its calls and answers what ``answer`` holds then."""

    def __init__(self, answer: bytes = b"a", delay_s: float = 0.0) -> None:
        self.answer, self.delay_s, self.calls = answer, delay_s, 0
        self.lock = threading.Lock()

    def __call__(self) -> bytes:
        with self.lock:
            self.calls += 1
        time.sleep(self.delay_s)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_many_clients_asking_at_once_cause_one_computation() -> None:
    async def scenario() -> None:
        cache, compute = AnswerCache(60), Computation(b"best", delay_s=0.2)
        answers = await asyncio.gather(*(cache.get("q", compute) for _ in range(50)))
        assert compute.calls == 1 and {body for body, _ in answers} == {b"best"}
        body, age = await cache.get("q", compute)  # fresh: no computation
        assert (body, compute.calls) == (b"best", 1) and 0 <= age < 60
    asyncio.run(scenario())


def test_a_stale_answer_is_served_while_one_recomputation_runs() -> None:
    async def scenario() -> None:
        cache, compute = AnswerCache(0.05), Computation(b"old")
        await cache.get("q", compute)
        await asyncio.sleep(0.06)
        compute.answer, compute.delay_s = b"new", 0.2
        stale = await asyncio.gather(*(cache.get("q", compute) for _ in range(10)))
        assert {body for body, _ in stale} == {b"old"} and min(age for _, age in stale) >= 0.05
        await asyncio.sleep(0.3)
        assert (await cache.get("q", compute))[0] == b"new" and compute.calls == 2
    asyncio.run(scenario())


def test_failures_are_not_kept() -> None:
    async def scenario() -> None:
        cache, compute = AnswerCache(60), Computation(LookupError("no profile"))
        for _ in range(2):  # each request asks again, and every waiter sees the failure
            results = await asyncio.gather(*(cache.get("q", compute) for _ in range(3)), return_exceptions=True)
            assert all(isinstance(r, LookupError) for r in results)
        assert compute.calls == 2
        compute.answer = b"found"
        assert (await cache.get("q", compute))[0] == b"found"
    asyncio.run(scenario())


def test_a_failed_recomputation_drops_the_stale_answer() -> None:
    async def scenario() -> None:
        cache, compute = AnswerCache(0.01), Computation(b"kept")
        await cache.get("q", compute)
        await asyncio.sleep(0.02)
        compute.answer = ConnectionError("database gone")
        assert (await cache.get("q", compute))[0] == b"kept"  # served stale; the refresh fails behind it
        await asyncio.sleep(0.05)
        with pytest.raises(ConnectionError):
            await cache.get("q", compute)
    asyncio.run(scenario())


def test_the_number_of_questions_kept_is_bounded_and_zero_keeps_nothing() -> None:
    async def scenario() -> None:
        cache, compute = AnswerCache(60, max_answers=3), Computation()
        for question in range(10):
            await cache.get(question, compute)
        assert len(cache._answers) == 3 and compute.calls == 10
        off, compute = AnswerCache(0), Computation()
        for _ in range(3):
            assert await off.get("q", compute) == (b"a", 0.0)
        assert compute.calls == 3
    asyncio.run(scenario())
    with pytest.raises(ValueError, match="max_age_s"):
        AnswerCache(-1)


@pytest.mark.slow
def test_a_live_server_answers_a_new_best_profile_once_the_kept_answer_is_old(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'autotune.db'}"
    fill(url)
    query = {"model": "tiny-target", "hardware": factory.H100[0]}
    with live_server(url, answer_cache_s=1.0) as client:
        first = client.get("/v1/profiles/best", params=query)
        assert first.status_code == 200 and first.headers["age"] == "0"
        best_id = first.json()["profile"]["id"]
        with open_database(url) as database, database.session() as session:  # twice as fast, stored now
            h100, target = factory.hardware(session, *factory.H100), factory.model(session, *TARGET)
            faster = factory.study(session, "faster", h100, target, methods=("none", "mtp"), scale=2.0,
                                   profile_concurrency=4).id
        assert client.get("/v1/profiles/best", params=query).json()["profile"]["id"] == best_id  # kept
        deadline = time.monotonic() + 10
        while client.get("/v1/profiles/best", params=query).json()["profile"]["id"] != faster:
            assert time.monotonic() < deadline, "the new best profile was never answered"
            time.sleep(0.2)
        missing = client.get("/v1/profiles/best", params={"model": "no-such-model"})
        assert missing.status_code == 404 and "age" not in missing.headers
        invalid = client.get("/v1/profiles/best", params={**query, "concurrency": 0})  # validated as ever
        assert invalid.status_code == 422 and invalid.json()["error"]["field"] == "concurrency"
        # Answers given before FastAPI parses the request still count under the route's label.
        counted = [line for line in client.get("/metrics").text.splitlines()
                   if line.startswith("autotune_http_requests_total{") and 'route="/v1/profiles/best"' in line]
        assert sum(float(line.rsplit(" ", 1)[1]) for line in counted if 'status="200"' in line) >= 3
