"""Bounds on what a client may send and ask for: the URL's length, a body's declared size and how
many items one list response holds. The server adds its own (header size, concurrent
connections: :mod:`.server`)."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from autotune.service.errors import error_response

MAX_URL_BYTES = 4096
# The read API takes no body; a client sending a large one is refused before it is read.
MAX_BODY_BYTES = 64 * 1024
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_NAME_LENGTH = 256  # a study, model or hardware name in a path or query


class RequestLimits:
    """ASGI middleware: 414 for a URL over :data:`MAX_URL_BYTES`, 413 for a declared body over
    :data:`MAX_BODY_BYTES`, both in the error shape and before any route runs."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = _refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _refusal(scope: Scope):  # noqa: ANN202 - a JSONResponse or None
    if len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") > MAX_URL_BYTES:
        return error_response(414, f"the URL is longer than {MAX_URL_BYTES} bytes")
    length = dict(scope.get("headers") or []).get(b"content-length")
    if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
        return error_response(413, f"a request body may hold at most {MAX_BODY_BYTES} bytes")
    return None
