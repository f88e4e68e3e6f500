"""One JSON error shape for every failure, ``{"error": {"status": ..., "message": ...}}``, and
nothing in it (or in the log) that names the database.

Status by cause: an unknown study, profile, model or hardware (:class:`~autotune.errors.NotFoundError`)
is 404; any other invalid option (:class:`~autotune.errors.ConfigurationError`) or a parameter
that fails validation is 422, with ``"field"`` naming the parameter (``body`` or ``query`` when the
library refused a combination of them, or the body is not JSON); an unreachable database is 503;
a bug is 500. Library messages are written for the user and kept, with any URL, the database's
password and (SQLite) its file replaced by :data:`autotune.store.redact.REDACTED`: a DatabaseError names its URL (in
the driver's spelling, ``postgresql+psycopg://``), an SQLite error its file. Tracebacks are never sent and never logged.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from autotune.errors import AutotuneError, ConfigurationError, DatabaseError, NotFoundError
from autotune.store.redact import Redactor

LOG = logging.getLogger("autotune.service")
DATABASE_UNAVAILABLE = "the database is unreachable or not at this autotune's schema revision (the server log says why)"
INTERNAL_ERROR = "internal error (the server log says which)"


class ErrorDetail(BaseModel):
    status: int
    message: str
    field: str | None = None  # on a 422: the parameter at fault, or `body` / `query` for them together


class ErrorBody(BaseModel):
    """The one error shape, as the OpenAPI document shows it."""

    error: ErrorDetail


# Documented on every route.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "Not stored: no such study, profile, model or hardware."},
    422: {"model": ErrorBody, "description": "An invalid parameter, named in `field` (`body` or `query` when only a "
                                             "combination of them is refused, or the body is not JSON)."},
    503: {"model": ErrorBody, "description": "The database is unreachable or at another schema revision."},
}


def error_response(status: int, message: str, **extra: Any) -> JSONResponse:
    """The one error shape; ``extra`` adds keys such as ``field``."""
    return JSONResponse({"error": {"status": status, "message": message, **extra}}, status_code=status)


def install(app: FastAPI, redact: Redactor) -> None:
    """Answer validation errors, HTTP errors (unknown route, wrong method) and the library's
    errors in the one shape, and anything else as a 500 through :class:`CatchAll`."""

    @app.exception_handler(RequestValidationError)
    async def invalid_parameter(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = exc.errors()
        fields = [_field(p["loc"]) for p in problems]
        message = "; ".join(_problem(p, field) for p, field in zip(problems, fields))
        return error_response(422, message, field=fields[0])

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        response = error_response(exc.status_code, str(exc.detail))
        response.headers.update(exc.headers or {})  # e.g. a 401's WWW-Authenticate
        return response

    @app.exception_handler(AutotuneError)
    async def library_error(request: Request, exc: AutotuneError) -> JSONResponse:
        message = redact(str(exc))
        if isinstance(exc, NotFoundError):
            return error_response(404, message)
        if isinstance(exc, ConfigurationError):  # one that knows its request field names it
            return error_response(422, message, field=getattr(exc, "field", None) or _whole(request))
        LOG.error("%s %s: %s: %s", request.method, request.url.path, type(exc).__name__, message)
        if isinstance(exc, DatabaseError):
            return error_response(503, DATABASE_UNAVAILABLE)
        return error_response(500, INTERNAL_ERROR)

    app.add_middleware(CatchAll, redact=redact)


def _field(loc: tuple) -> str:
    """The parameter or body field at fault: the name after the location (``("body", "concurrencies",
    1)``, an item of a list, names ``concurrencies``); the body itself when that is not a name (a
    JSON syntax error is located at a byte offset, ``("body", 12)``)."""
    return str(loc[1]) if len(loc) > 1 and isinstance(loc[1], str) else str(loc[0])


def _problem(problem: dict[str, Any], field: str) -> str:
    if problem["type"] == "json_invalid":
        why = problem.get("ctx", {}).get("error", problem["msg"])
        return f"the body is not valid JSON: {why} at byte {problem['loc'][-1]}"
    where = {"query": "query parameter", "path": "path parameter", "body": "body field"}.get(str(problem["loc"][0]),
                                                                                            "parameter")
    return f"{where} {field!r}: {problem['msg']}"


def _whole(request: Request) -> str:
    """The field of a refusal that names no single parameter: the request's parameters taken together
    (its body, where it has one; else its query)."""
    return "body" if request.method in ("POST", "PUT", "PATCH") else "query"


class CatchAll:
    """ASGI middleware: an exception no handler took becomes a logged line (type and redacted
    message, no traceback) and a 500 in the error shape, instead of uvicorn's traceback."""

    def __init__(self, app: ASGIApp, redact: Redactor) -> None:
        self.app = app
        self.redact = redact

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:  # noqa: BLE001 - the last line of defence: log one line, answer 500
            LOG.error("%s %s: %s: %s", scope.get("method"), scope.get("path"), type(exc).__name__,
                      self.redact(str(exc)))
            if not started:  # once the response has begun, closing the connection is all that is left
                await error_response(500, INTERNAL_ERROR)(scope, receive, send)
