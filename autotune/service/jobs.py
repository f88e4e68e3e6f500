"""The job routes: queue a tune (``POST /v1/tune``), list and read jobs, cancel one. Each makes one
:mod:`autotune.jobs` call; the writes need the bearer token (:mod:`.auth`).

The body of ``POST /v1/tune`` holds the options of ``autotune tune`` by their request names
(:mod:`autotune.search.request`). Its types and bounds are declared here, so that a bad value is a
422 naming its field before anything runs; the tune's own validation then checks the rest, as
for the command, and writes nothing when it refuses.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from autotune import jobs
from autotune.engines.base import MAX_DEPTH, METHODS
from autotune.jobs.records import STATUSES
from autotune.jobs.roots import ModelRoots
from autotune.planning import MAX_CONCURRENCY
from autotune.service.auth import AUTH_RESPONSES, BearerToken
from autotune.service.errors import ERROR_RESPONSES
from autotune.service.limits import DEFAULT_LIMIT, MAX_LIMIT, MAX_NAME_LENGTH
from autotune.service.routes import json_response

MAX_PATH_LENGTH = 4096
MAX_LIST = 64  # drafts, methods, concurrency levels: far beyond any real study
MAX_JOB_ID = 2**31 - 1

Method = Literal[METHODS]  # type: ignore[valid-type]
Status = Literal[STATUSES]  # type: ignore[valid-type]
FilePath = Annotated[str, Field(min_length=1, max_length=MAX_PATH_LENGTH)]
Seconds = Annotated[float, Field(gt=0, le=1e7)]
JobId = Annotated[int, Path(ge=1, le=MAX_JOB_ID, description="The job's id.")]


class TuneRequest(BaseModel):
    """The options of `autotune tune`, by their names there (`--max-depth` is `max_depth`);
    repeatable options are lists, flags booleans; each one left out takes the command's default.
    Model and workload files are paths on the worker, under its model roots."""

    model_config = ConfigDict(extra="forbid")

    study: str | None = Field(None, min_length=1, max_length=MAX_NAME_LENGTH,
                              description="Study name (default: `job-<id>`); an existing study's name resumes it.")
    target: FilePath | None = Field(None, description="Target model file (folder for trtllm/vllm); default: built-in.")
    draft: list[FilePath] | None = Field(None, max_length=MAX_LIST, description="Draft candidates; 'builtin' or files.")
    method: list[Method] | None = Field(None, max_length=len(METHODS), description="Methods to search; default: all.")
    max_depth: int | None = Field(None, ge=1, le=MAX_DEPTH)
    concurrencies: list[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]] | None = Field(None, min_length=1,
                                                                                     max_length=MAX_LIST)
    sampler: str | None = Field(None, max_length=32, description="model, tpe, random or grid.")
    no_explore_beyond: bool | None = None
    seed: int | None = Field(None, ge=0, le=2**32 - 1)
    trials: int | None = Field(None, ge=1, le=100_000)
    timeout: Seconds | None = None
    trial_timeout: Seconds | None = None
    objective: str | None = Field(None, max_length=32, description="throughput or pareto.")
    slo_tpot_ms: Annotated[float, Field(gt=0, le=1e6)] | None = None
    slo_ttft_ms: Annotated[float, Field(gt=0, le=1e6)] | None = None
    slo_percentile: Literal[50, 90, 99] | None = None
    workload: FilePath | None = Field(None, description="JSONL workload file; default: built-in.")
    retry_failed: int | None = Field(None, ge=0, le=100)
    no_confirm: bool | None = None
    precision: float | None = Field(None, gt=0, lt=1)
    max_repetitions: int | None = Field(None, ge=1, le=10_000)
    confirm_seconds: Seconds | None = None
    engine: str | None = Field(None, max_length=32, description="embedded, trtllm or vllm.")
    # The old name of `concurrencies` (before issue 38), still accepted; declared last, so that its
    # check sees whether `concurrencies` was given too.
    batch_sizes: list[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]] | None = Field(
        None, min_length=1, max_length=MAX_LIST, description="The old name of `concurrencies`.", deprecated=True)

    @field_validator("batch_sizes")
    @classmethod
    def _one_name(cls, value: list[int] | None, info: ValidationInfo) -> list[int] | None:
        if value is not None and info.data.get("concurrencies") is not None:
            raise ValueError("batch_sizes is the old name of concurrencies: give one of them")
        return value

    @model_validator(mode="after")
    def _current_name(self) -> TuneRequest:
        """A request that says `batch_sizes` is kept (and queued) as one that says `concurrencies`."""
        if "batch_sizes" in self.model_fields_set:
            if self.batch_sizes is not None:
                self.concurrencies = self.batch_sizes
                self.model_fields_set.add("concurrencies")
            self.batch_sizes = None
            self.model_fields_set.discard("batch_sizes")
        return self


def build_router(db_url: str | None, roots: ModelRoots | None, auth: BearerToken) -> APIRouter:
    """The job routes over the database at ``db_url``; ``roots``: the model roots the server knows
    (None: the workers alone check the paths)."""
    router = APIRouter(tags=["jobs"], responses=ERROR_RESPONSES)
    writes = {"dependencies": [Depends(auth)], "responses": AUTH_RESPONSES}

    @router.post("/v1/tune", status_code=202, summary="Queue a tune (`autotune tune`): needs the bearer token",
                 **writes)
    def tune(request: TuneRequest) -> Response:
        """Checks the options as `autotune tune` does (422 naming the field; nothing is written),
        then queues the job and answers 202 with it. On a single-file database the server runs it
        itself; on a team database an `autotune worker` takes it. Follow it at `/v1/jobs/{id}`.
        (The answer names no database kind: tests/service/test_errors.py.)"""
        job = jobs.submit(db_url, request.model_dump(exclude_unset=True), roots)
        response = json_response(job.to_dict(), headers={"Location": f"/v1/jobs/{job.id}"})
        response.status_code = 202
        return response

    @router.get("/v1/jobs", summary="Queued, running and finished jobs, newest first")
    def job_list(status: Status | None = None,
                 limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT) -> Response:
        found, total = jobs.list_jobs(db_url, limit, status)
        return json_response([job.to_dict() for job in found], headers={"X-Total-Count": str(total)})

    @router.get("/v1/jobs/{job_id}", summary="One job: status, progress, log tail, study, profile id, error")
    def job(job_id: JobId) -> Response:
        return json_response(jobs.get_job(db_url, job_id).to_dict())

    @router.post("/v1/jobs/{job_id}/cancel", summary="Cancel a job: needs the bearer token", **writes)
    def cancel(job_id: JobId) -> Response:
        """A queued job is cancelled at once; a running one stops at its next trial boundary (the
        trial under way is abandoned and queued again in its study); a finished one is left as it
        is. Answers the job as it stands."""
        return json_response(jobs.cancel_job(db_url, job_id).to_dict())

    return router
