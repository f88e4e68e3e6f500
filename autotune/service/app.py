"""The ASGI app: :func:`create_app` assembles the routes, the error shape, the limits and the
metrics for one database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from autotune import __version__
from autotune.errors import AutotuneError
from autotune.jobs.roots import ModelRoots
from autotune.service import errors, jobs, page
from autotune.service.answers import AnswerCache
from autotune.service.auth import BearerToken, server_token
from autotune.service.databases import KeepDatabasesOpen
from autotune.service.head import HeadAsGet
from autotune.service.limits import RequestLimits
from autotune.service.metrics import Metrics
from autotune.service.routes import BEST_PATH, READ_ONLY, build_router

DOCS_ASSETS_PATH = "/docs-assets"
DESCRIPTION = (
    "The results autotune stored (deployment profiles, studies and their trials, hardware), its "
    "what-if planner, and queued tunes (jobs), in the JSON shapes `autotune ... --json` prints. " + READ_ONLY +
    " Errors have one shape: `{\"error\": {\"status\": ..., \"message\": ...}}` (404: unknown study, "
    "profile, job, model or hardware; 422: an invalid parameter, named in `field`)."
)


def create_app(db_url: str | None = None, *, model_roots: ModelRoots | None = None, run_jobs: bool = True,
               answer_cache_s: float = 0.0) -> FastAPI:
    """The API over the database at ``db_url`` (None: autotune's default, as for the CLI). Nothing
    is opened here: the first request opens the database, later ones reuse its engine
    (:class:`KeepDatabasesOpen`) and check its schema revision, as each CLI command does. Writes take the
    token of ``AUTOTUNE_API_TOKEN`` (none: read-only). ``model_roots``: where jobs may read files
    (None: not known here, the workers check). ``run_jobs``: on SQLite, run the queued jobs in a
    thread while the app runs (:mod:`autotune.jobs.local`). ``answer_cache_s``: how long a best-profile
    answer is kept (:mod:`autotune.service.answers`; 0: every request asks the database)."""
    auth = BearerToken(server_token())

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        from autotune.jobs import runs_jobs_itself
        from autotune.jobs.local import LocalRunner

        try:
            local = run_jobs and runs_jobs_itself(db_url)
        except AutotuneError:  # a malformed URL: every request answers 503, and no job can be queued
            local = False
        runner = LocalRunner(db_url, model_roots or ModelRoots.of()) if local else None
        if runner is not None:
            runner.start()
        try:
            yield
        finally:
            if runner is not None:
                runner.close()

    # Swagger UI's script and style from the fastapi-offline package, not a CDN: /docs works offline.
    app = FastAPIOffline(title="autotune", version=__version__, description=DESCRIPTION, docs_url="/docs",
                         openapi_url="/openapi.json", redoc_url=None, static_url=DOCS_ASSETS_PATH,
                         favicon_url=page.FAVICON_PATH, lifespan=lifespan)
    metrics = Metrics()
    answers = AnswerCache(answer_cache_s)
    reads = build_router(db_url, auth.writable, answers)
    app.include_router(reads)
    app.include_router(jobs.build_router(db_url, model_roots, auth))
    app.include_router(metrics.router)
    page.install(app)
    # Starlette wraps the last added outermost: metrics see every answer, the 500s of CatchAll and
    # the refusals of RequestLimits included; kept answers are given inside the open databases, which
    # their recomputations use.
    best_route = next(route for route in reads.routes if getattr(route, "path", None) == BEST_PATH)
    app.add_middleware(answers.middleware(BEST_PATH, best_route))
    app.add_middleware(RequestLimits)
    app.add_middleware(KeepDatabasesOpen)
    errors.install(app, errors.Redactor.for_database(db_url))
    app.add_middleware(HeadAsGet)  # outside the others: every answer to a HEAD loses its body
    app.add_middleware(metrics.middleware)
    return app
