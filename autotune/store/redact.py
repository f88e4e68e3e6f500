"""Keeping the database's name out of what clients read: :class:`Redactor` replaces any URL and
the database's URL, password and (SQLite) file in a text. The service passes every error message
through it; the job queue passes what it stores for clients (a job's error line, its log tail)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from autotune.store.database import display_url, resolve_database_url

REDACTED = "[database]"
# Any URL: scheme://, then everything up to a blank or a quote.
URL_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]*")


class Redactor:
    """Replaces every URL, and the database's URL as given, password and (SQLite) file, in a text."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        # Longest first, so that a URL is replaced whole before its file path inside it.
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    @classmethod
    def for_database(cls, db_url: str | None) -> Redactor:
        resolved = resolve_database_url(db_url)
        secrets = [db_url, resolved]
        try:
            url = make_url(resolved)
        except ArgumentError:  # a malformed URL is refused when opened; hide it whole meanwhile
            return cls(secrets)
        secrets += [display_url(url), url.render_as_string(hide_password=False), url.password]
        if url.get_backend_name() == "sqlite":
            secrets.append(url.database)
        return cls(secrets)

    def __call__(self, text: str) -> str:
        text = URL_PATTERN.sub(REDACTED, text)
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text
