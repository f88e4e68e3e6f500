"""The page at ``/``: one static HTML file and a small script that read the JSON API in the
browser (studies, profiles, the best profile per model and hardware, exports, jobs with their
progress, and a study's plots with the progress of the job tuning it). No build step and nothing
fetched from elsewhere: the files are in ``page_files/`` (the script, style and icon in its
``assets/``).

Stored names are user input, so the script only ever sets text (never HTML), and the page is sent
with a Content-Security-Policy that runs no script but its own: a name that slipped into markup
still could not run.
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

FILES = resources.files("autotune.service") / "page_files"
ASSETS_PATH = "/assets"
FAVICON_PATH = "/favicon.ico"  # where browsers ask for it (the page and /docs name it too)
# Script, style, plots and icon from this server only.
CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
                           "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def install(app: FastAPI) -> None:
    """Serve the page at ``/``, its script, style and icon under :data:`ASSETS_PATH`, and the icon
    at :data:`FAVICON_PATH` too."""
    index = (FILES / "index.html").read_text(encoding="utf-8")

    @app.get("/", include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(index, headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY,
                                            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"})

    @app.get(FAVICON_PATH, include_in_schema=False)
    def favicon() -> FileResponse:
        return FileResponse(str(FILES / "assets" / "favicon.ico"), media_type="image/x-icon")

    app.mount(ASSETS_PATH, StaticFiles(directory=str(FILES / "assets")), name="assets")
