"""``autotune serve``: the stored results over HTTP, as a read-only JSON API (DESIGN.md §11).

One module per concern: :mod:`.app` builds the ASGI app (:func:`create_app`), :mod:`.routes` maps
each route to one :mod:`autotune.api` call (the one the CLI makes), :mod:`.errors` gives every
failure one JSON shape without leaking the database URL, :mod:`.limits` bounds requests,
:mod:`.metrics` counts them for Prometheus and :mod:`.server` runs the app under uvicorn.

Not built yet (issue 23): the job queue and ``autotune worker``, token-protected writes
(``AUTOTUNE_API_TOKEN``), the page at ``/``.
"""

from autotune.service.app import create_app
from autotune.service.server import serve

__all__ = ["create_app", "serve"]
