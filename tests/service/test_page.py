"""The page at / and the API docs at /docs in a real browser (:mod:`browser_support`: Debian's
chromium, resolving no host but the loopback) against a live server on an SQLite file: the tables
show what the API stores, exports download the CLI's bytes, a study's plots show as images, and
/docs renders every operation offline, the console clean. The jobs panel, on real jobs, is
test_page_jobs.py's.

The database holds the service tests' studies and one whose study, hardware and model are named
with markup (:data:`HOSTILE`): it must show as text and run nothing.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

import profile_factory as factory
from autotune import api
from autotune.serving import FORMATS
from autotune.store import open_database
from browser_support import (WAIT_S, cell_texts, chromium, click, console_errors, foreign_requests, open_page,
                             row_keys)
from service_support import cli_output, fill, live_server

HOSTILE = '<img src=x onerror="document.body.dataset.pwned=1">'


@pytest.fixture(scope="module")
def page_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, int]]:
    """The service tests' database plus the hostile study: its URL and profile ids by study name."""
    url = f"sqlite:///{tmp_path_factory.mktemp('page') / 'autotune.db'}"
    ids = fill(url)
    with open_database(url) as database, database.session() as session:
        hostile = factory.study(session, HOSTILE, factory.hardware(session, HOSTILE, "eeee111122223333"),
                                factory.model(session, HOSTILE, "hhhh000011112222"), methods=("none", "mtp"),
                                concurrencies=(1, 2))
        ids[HOSTILE] = hostile.id
    return url, ids


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


@pytest.fixture(scope="module")
def server_url(page_db: tuple[str, dict[str, int]]) -> Iterator[str]:
    """A live server on the page's database: its base URL."""
    with live_server(page_db[0]) as client:
        yield str(client.base_url)


@pytest.fixture
def page(server_url: str, browser: WebDriver) -> WebDriver:
    """The browser on the page, freshly loaded and with everything on it drawn."""
    open_page(browser, server_url)
    return browser


def test_tables_show_the_stored_studies_and_profiles(page: WebDriver, page_db: tuple[str, dict[str, int]],
                                                     server_url: str) -> None:
    url, ids = page_db
    assert sorted(row_keys(page, "studies", "data-study")) == sorted(s.name for s in api.studies(url))
    assert sorted(map(int, row_keys(page, "profiles", "data-profile-id"))) == sorted(ids.values())
    pairs = {(p.target.fingerprint, p.hardware.fingerprint) for p in api.list_profiles(url)}
    best = {api.best_profile(url, model, hardware=hardware).profile.id for model, hardware in pairs}
    assert sorted(map(int, row_keys(page, "best", "data-profile-id"))) == sorted(best)
    assert "tiny-target" in cell_texts(page, "#best td")
    assert console_errors(page) == [] and foreign_requests(page, server_url) == []  # the icon included


def test_export_buttons_download_the_bytes_autotune_export_writes(page: WebDriver, page_db: tuple[str, dict[str, int]],
                                                                  tmp_path: Path) -> None:
    url, ids = page_db
    profile_id = ids["h100-old"]
    for fmt in FORMATS:
        downloads = tmp_path / fmt
        downloads.mkdir()
        page.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
        click(page, f'#profiles tr[data-profile-id="{profile_id}"] a[data-format="{fmt}"]')
        downloaded = wait_for_download(downloads)
        written = tmp_path / f"cli-{fmt}"
        cli_output("export", str(profile_id), "--format", fmt, "-o", str(written), "--db", url)
        assert downloaded.read_bytes() == written.read_bytes(), fmt


def wait_for_download(folder: Path) -> Path:
    """The one file the browser saved in ``folder``, once complete."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        done = [path for path in folder.iterdir() if not path.name.endswith(".crdownload")]
        if done:
            return done[0]
        time.sleep(0.05)
    raise AssertionError(f"nothing downloaded into {folder}")


def test_a_stored_name_with_markup_shows_as_text(page: WebDriver) -> None:
    for table in ("studies", "profiles", "best"):
        assert HOSTILE in cell_texts(page, f"#{table} td"), table
    hostile = next(row for row in page.find_elements(By.CSS_SELECTOR, "#studies tbody tr")
                   if row.get_attribute("data-study") == HOSTILE)
    hostile.find_element(By.TAG_NAME, "button").click()  # the study view's title is text too
    WebDriverWait(page, WAIT_S).until(lambda b: b.find_element(By.ID, "study-title").text == f"Study {HOSTILE}")
    WebDriverWait(page, WAIT_S).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#plots img"))
    assert not page.find_elements(By.CSS_SELECTOR, "main img:not(#plots img)")
    assert page.execute_script("return document.body.dataset.pwned") is None


def plots_drawn(browser: WebDriver) -> list[dict]:
    """The study view's images once each has loaded: their URLs and natural widths."""
    def loaded(b: WebDriver) -> list[dict] | None:
        images = b.execute_script("return [...document.querySelectorAll('#plots img')]"
                                  ".map(i => ({src: i.src, complete: i.complete, width: i.naturalWidth}))")
        return images if images and all(image["complete"] for image in images) else None
    return WebDriverWait(browser, WAIT_S).until(loaded)


def test_the_study_view_shows_the_plots_with_their_intervals(page: WebDriver, server_url: str, tmp_path: Path) -> None:
    click(page, '#studies tr[data-study="h100-old"] button')
    assert page.find_element(By.ID, "study-title").text == "Study h100-old"
    images = plots_drawn(page)
    listing = api_json(server_url, "/v1/studies/h100-old/plots")
    assert [image["src"] for image in images] == [server_url.rstrip("/") + plot["url"] for plot in listing["plots"]]
    assert all(image["width"] > 0 for image in images), images
    captions = cell_texts(page, "#plots figcaption")
    assert captions == [plot["caption"] for plot in listing["plots"]] and "95 % intervals" in captions[0]
    assert "95 % intervals" in page.find_element(By.ID, "plots-note").text
    assert page.find_element(By.ID, "report-link").get_attribute("href").endswith("/v1/studies/h100-old/report")

    # What a person sees: the screenshot of the first figure holds a drawn plot, not a blank box.
    first = page.find_element(By.CSS_SELECTOR, "#plots figure img")
    page.execute_script("arguments[0].scrollIntoView()", first)
    shot = first.screenshot_as_png
    (tmp_path / "first-plot.png").write_bytes(shot)  # kept with the test's files for a look
    image = Image.open(io.BytesIO(shot)).convert("RGB")
    assert image.width > 200 and len(image.getcolors(maxcolors=1 << 20)) > 50  # axes, text, coloured series
    assert console_errors(page) == [] and foreign_requests(page, server_url) == []

    click(page, '#studies tr[data-study="other"] button')  # a study only screened
    WebDriverWait(page, WAIT_S).until(lambda b: "no interval" in b.find_element(By.ID, "plots-note").text)


def test_the_api_docs_render_offline_with_a_clean_console(browser: WebDriver, server_url: str) -> None:
    operations = sum(len(methods) for methods in api_json(server_url, "/openapi.json")["paths"].values())
    browser.get(server_url.rstrip("/") + "/docs")
    WebDriverWait(browser, WAIT_S).until(lambda b: len(b.find_elements(By.CSS_SELECTOR, ".opblock")) == operations)
    assert "autotune" in browser.find_element(By.CSS_SELECTOR, ".information-container").text
    assert console_errors(browser) == [] and foreign_requests(browser, server_url) == []


def api_json(server_url: str, path: str) -> dict:
    return httpx.get(server_url.rstrip("/") + path).json()
