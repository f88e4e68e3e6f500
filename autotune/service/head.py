"""HEAD wherever GET exists (HTTP: a HEAD is answered as the GET would be, without the body);
FastAPI routes declare GET alone, so without this a HEAD on an export was a 405."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    """ASGI middleware: a HEAD request goes through the app as a GET, and the body of its answer is
    dropped (the headers, Content-Length included, are the GET's). A route without GET still
    answers 405."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        # A copy: the server keeps its own scope saying HEAD, so it sends no body either.
        as_get = {**scope, "method": "GET"}
        try:
            await self.app(as_get, receive, without_body)
        finally:
            if "route" in as_get:  # the route the GET matched, for the metrics' label
                scope["route"] = as_get["route"]
