"""Who may write: the routes that change something (queue a tune, cancel a job) need
``Authorization: Bearer <token>`` equal to the server's ``AUTOTUNE_API_TOKEN``.

Without the variable set the API is read-only and every write answers 403 saying so. A missing
(or non-Bearer) header is 401, a wrong token 403. The comparison is constant-time
(:func:`hmac.compare_digest` on bytes), and the token is never logged nor put in a response: the
access log shows paths, never headers.
"""

from __future__ import annotations

import hmac
import os
from typing import Any

from fastapi import Request
from starlette.exceptions import HTTPException

from autotune.service.errors import ErrorBody

ENV_API_TOKEN = "AUTOTUNE_API_TOKEN"
READ_ONLY_WRITES = (f"this server is read-only: it was started without {ENV_API_TOKEN}, so it takes no writes "
                    "(queued tunes, cancellations)")
# Documented on every write route.
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No `Authorization: Bearer <token>` header."},
    403: {"model": ErrorBody, "description": f"A wrong token, or a read-only server (no {ENV_API_TOKEN} set)."},
}


def server_token() -> str | None:
    """The write token of this server (None or empty: read-only)."""
    return os.environ.get(ENV_API_TOKEN) or None


class BearerToken:
    """A FastAPI dependency: passes a request carrying the server's token, refuses any other."""

    def __init__(self, token: str | None) -> None:
        self._token = token.encode("utf-8") if token else None

    @property
    def writable(self) -> bool:
        return self._token is not None

    def __call__(self, request: Request) -> None:
        if self._token is None:
            raise HTTPException(403, READ_ONLY_WRITES)
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise HTTPException(401, "this route writes: send the token as `Authorization: Bearer <token>`",
                                headers={"WWW-Authenticate": "Bearer"})
        if not hmac.compare_digest(given.strip().encode("utf-8"), self._token):
            raise HTTPException(403, "the bearer token is not this server's")
