"""The ASGI app: :func:`create_app` assembles the routes, the error shape, the limits and the
metrics for one database."""

from __future__ import annotations

from fastapi import FastAPI

from autotune import __version__
from autotune.service import errors, page
from autotune.service.databases import KeepDatabasesOpen
from autotune.service.limits import RequestLimits
from autotune.service.metrics import Metrics
from autotune.service.routes import READ_ONLY, build_router

DESCRIPTION = (
    "The results autotune stored (deployment profiles, studies and their trials, hardware) and "
    "its what-if planner, in the JSON shapes `autotune ... --json` prints. " + READ_ONLY +
    " Errors have one shape: `{\"error\": {\"status\": ..., \"message\": ...}}` (404: unknown study, "
    "profile, model or hardware; 422: an invalid parameter, named in `field`)."
)


def create_app(db_url: str | None = None) -> FastAPI:
    """The read API over the database at ``db_url`` (None: autotune's default, as for the CLI).
    Nothing is opened here: the first request opens the database, later ones reuse its engine
    (:class:`KeepDatabasesOpen`) and check its schema revision, as each CLI command does."""
    app = FastAPI(title="autotune", version=__version__, description=DESCRIPTION, docs_url="/docs",
                  openapi_url="/openapi.json", redoc_url=None)
    metrics = Metrics()
    app.include_router(build_router(db_url))
    app.include_router(metrics.router)
    page.install(app)
    # Starlette wraps the last added outermost: metrics see every answer, the 500s of CatchAll and
    # the refusals of RequestLimits included.
    app.add_middleware(RequestLimits)
    app.add_middleware(KeepDatabasesOpen)
    errors.install(app, errors.Redactor.for_database(db_url))
    app.add_middleware(metrics.middleware)
    return app
