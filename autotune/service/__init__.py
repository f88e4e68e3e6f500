"""``autotune serve``: the stored results over HTTP as a JSON API, queued tunes, and a page for
people (DESIGN.md §11).

One module per concern: :mod:`.app` builds the ASGI app (:func:`create_app`), :mod:`.routes` maps
each read route to one :mod:`autotune.api` call (the one the CLI makes), :mod:`.jobs` the job routes
to :mod:`autotune.jobs`, :mod:`.plots` serves a study's plots, :mod:`.page` the page at ``/`` and
its icon, :mod:`.auth` guards the writes, :mod:`.errors` gives every failure one JSON shape without
leaking the database URL, :mod:`.limits` bounds requests, :mod:`.head` answers HEAD as GET,
:mod:`.answers` keeps best-profile answers a few seconds, :mod:`.databases` keeps the databases
open, :mod:`.metrics` counts requests for Prometheus and :mod:`.server` runs the app under uvicorn.
"""

from autotune.service.app import create_app
from autotune.service.server import serve

__all__ = ["create_app", "serve"]
