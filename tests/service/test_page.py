"""The page at / in a real browser: Debian's chromium, headless, driven by selenium through
Debian's chromedriver (nothing is downloaded), against a live server on an SQLite file.

The database holds the service tests' studies and one whose study, hardware and model are named
with markup (:data:`HOSTILE`): it must show as text and run nothing. The browser is required in
CI (.ci/run installs it and sets CI=true); elsewhere the tests skip without it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

import profile_factory as factory
from autotune import api
from autotune.service import create_app
from autotune.serving import FORMATS
from autotune.store import open_database
from service_support import cli_output, fill, live_server

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
HOSTILE = '<img src=x onerror="document.body.dataset.pwned=1">'
WAIT_S = 20
# What the jobs panel is shown (the fields of GET /v1/jobs); the study's name is hostile too.
JOBS = [{"id": 7, "state": "running", "study": HOSTILE, "error": None, "profile_id": None,
         "progress": {"phase": "screening", "trials_done": 3, "trials_total": 12, "builds": 2, "eta_s": 95.0},
         "log_tail": ["trial 3: mtp depth 2 at batch size 4", HOSTILE]},
        {"id": 6, "state": "queued", "study": "next-study", "error": None, "profile_id": None, "progress": None,
         "log_tail": []}]


@pytest.fixture(scope="module")
def page_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, int]]:
    """The service tests' database plus the hostile study: its URL and profile ids by study name."""
    url = f"sqlite:///{tmp_path_factory.mktemp('page') / 'autotune.db'}"
    ids = fill(url)
    with open_database(url) as database, database.session() as session:
        hostile = factory.study(session, HOSTILE, factory.hardware(session, HOSTILE, "eeee111122223333"),
                                factory.model(session, HOSTILE, "hhhh000011112222"), methods=("none", "mtp"),
                                batch_sizes=(1, 2))
        ids[HOSTILE] = hostile.id
    return url, ids


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser tests: {', '.join(missing)} missing (apt-get install chromium "
                        "chromium-driver, as .ci/run does)")
        pytest.skip(f"the page's browser tests need Debian's chromium and chromium-driver ({', '.join(missing)} missing)")
    options = Options()
    options.binary_location = str(CHROMIUM)
    # --no-sandbox: chromium refuses to run as root (CI does) with its sandbox on.
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


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


def open_page(browser: WebDriver, base_url: str) -> None:
    browser.get(base_url.rstrip("/") + "/")
    WebDriverWait(browser, WAIT_S).until(lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-loaded"))
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") == "true", \
        browser.find_element(By.ID, "status").text


def row_keys(browser: WebDriver, table: str, attribute: str) -> list[str]:
    return [row.get_attribute(attribute) for row in browser.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")]


def cell_texts(browser: WebDriver, selector: str) -> list[str]:
    return [cell.get_attribute("textContent") for cell in browser.find_elements(By.CSS_SELECTOR, selector)]


def test_tables_show_the_stored_studies_and_profiles(page: WebDriver, page_db: tuple[str, dict[str, int]]) -> None:
    url, ids = page_db
    assert sorted(row_keys(page, "studies", "data-study")) == sorted(s.name for s in api.studies(url))
    assert sorted(map(int, row_keys(page, "profiles", "data-profile-id"))) == sorted(ids.values())
    pairs = {(p.target.fingerprint, p.hardware.fingerprint) for p in api.list_profiles(url)}
    best = {api.best_profile(url, model, hardware=hardware).profile.id for model, hardware in pairs}
    assert sorted(map(int, row_keys(page, "best", "data-profile-id"))) == sorted(best)
    assert "tiny-target" in cell_texts(page, "#best td")


def test_export_buttons_download_the_bytes_autotune_export_writes(page: WebDriver, page_db: tuple[str, dict[str, int]],
                                                                  tmp_path: Path) -> None:
    url, ids = page_db
    profile_id = ids["h100-old"]
    for fmt in FORMATS:
        downloads = tmp_path / fmt
        downloads.mkdir()
        page.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
        page.find_element(By.CSS_SELECTOR, f'#profiles tr[data-profile-id="{profile_id}"] a[data-format="{fmt}"]').click()
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
    assert not page.find_elements(By.CSS_SELECTOR, "main img")
    assert page.execute_script("return document.body.dataset.pwned") is None


def test_a_study_report_shows_its_plots(page: WebDriver) -> None:
    page.find_element(By.CSS_SELECTOR, '#studies tr[data-study="h100-old"] button').click()
    frame = page.find_element(By.ID, "report")
    assert frame.get_attribute("src").endswith("/v1/studies/h100-old/report")
    assert page.find_element(By.ID, "report-title").text == "Report: h100-old"
    page.switch_to.frame(frame)
    try:
        WebDriverWait(page, WAIT_S).until(lambda b: b.find_elements(By.CSS_SELECTOR, "img"))
        assert "h100-old" in page.find_element(By.TAG_NAME, "body").text
    finally:
        page.switch_to.default_content()


def test_jobs_show_their_progress(page_db: tuple[str, dict[str, int]], browser: WebDriver) -> None:
    app = create_app(page_db[0])
    app.add_api_route("/v1/jobs", lambda: JOBS, methods=["GET"])
    app.router.routes.insert(0, app.router.routes.pop())  # before any /v1/jobs the server has itself
    with live_server(page_db[0], app) as client:
        open_page(browser, str(client.base_url))
        assert row_keys(browser, "jobs", "data-state") == ["running", "queued"]
        bar = browser.find_element(By.CSS_SELECTOR, '#jobs tr[data-job-id="7"] progress')
        assert (bar.get_attribute("value"), bar.get_attribute("max")) == ("3", "12")
        texts = cell_texts(browser, '#jobs tr[data-job-id="7"] td')
        assert HOSTILE in texts and "screening 3/12 trials" in texts and "95 s" in texts
        assert cell_texts(browser, '#jobs tr[data-job-id="7"] pre') == ["trial 3: mtp depth 2 at batch size 4\n" + HOSTILE]
        assert not browser.find_elements(By.CSS_SELECTOR, "main img")
