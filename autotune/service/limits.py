"""Bounds on what a client may send and ask for: the URL's length, a body's declared size and how
many items one list response holds. The server adds its own (header size, concurrent
connections: :mod:`.server`)."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from autotune.service.errors import error_response

MAX_URL_BYTES = 4096
# Only the writes take a body (a tune request: well under a KiB); a larger one is refused, before it
# is read when its Content-Length says so, else once that much has arrived (a chunked upload).
MAX_BODY_BYTES = 64 * 1024
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_NAME_LENGTH = 256  # a study, model or hardware name in a path or query
BODY_TOO_LARGE = f"a request body may hold at most {MAX_BODY_BYTES} bytes"


class BodyTooLarge(HTTPException):
    """A body without Content-Length that grew past :data:`MAX_BODY_BYTES` while it was read. An
    HTTPException, so that FastAPI, reading the body for a route, passes it on as the 413 it is."""

    def __init__(self) -> None:
        super().__init__(413, BODY_TOO_LARGE)


class RequestLimits:
    """ASGI middleware: 414 for a URL over :data:`MAX_URL_BYTES`, 413 for a declared body over
    :data:`MAX_BODY_BYTES`, both in the error shape and before any route runs; and a body sent
    without a length is cut off (413) once it passes that size."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = _refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
            receive = _bounded(receive)
        await self.app(scope, receive, send)


def _bounded(receive: Receive) -> Receive:
    received = 0

    async def bounded_receive() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > MAX_BODY_BYTES:
                raise BodyTooLarge()
        return message

    return bounded_receive


def _refusal(scope: Scope):  # noqa: ANN202 - a JSONResponse or None
    if len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") > MAX_URL_BYTES:
        return error_response(414, f"the URL is longer than {MAX_URL_BYTES} bytes")
    length = dict(scope.get("headers") or []).get(b"content-length")
    if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
        return error_response(413, BODY_TOO_LARGE)
    return None
