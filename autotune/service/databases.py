"""The server's databases stay open between requests (:mod:`autotune.store.shared`): each request
runs with the app's :class:`~autotune.store.shared.SharedDatabases` active, and they are closed
when the server shuts down."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from autotune.store.shared import SharedDatabases


class KeepDatabasesOpen:
    """ASGI middleware: requests reuse one engine per database URL; the lifespan's shutdown
    closes them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.databases = SharedDatabases()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._closing_on_shutdown(send))
            return
        with self.databases.active():
            await self.app(scope, receive, send)

    def _closing_on_shutdown(self, send: Send) -> Send:
        async def closing_send(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                self.databases.close()
            await send(message)

        return closing_send
