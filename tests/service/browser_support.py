"""The browser of the page tests: Debian's chromium, headless, driven by selenium through Debian's
chromedriver (nothing is downloaded). It resolves no host name but the loopback's, so a page that
reaches for another host (a CDN) fails visibly, as it would on an offline machine; its console is
kept for the tests to read. Required in CI (.ci/run installs it and sets CI=true); elsewhere the
tests skip without it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WAIT_S = 20
OFFLINE = "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"


@contextmanager
def chromium() -> Iterator[WebDriver]:
    """A fresh headless chromium (its own profile folder, no background traffic), quit afterwards."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser tests: {', '.join(missing)} missing (apt-get install chromium "
                        "chromium-driver, as .ci/run does)")
        pytest.skip(f"the page's browser tests need Debian's chromium and chromium-driver ({', '.join(missing)} missing)")
    with tempfile.TemporaryDirectory(prefix="autotune-chromium-") as profile:
        options = Options()
        options.binary_location = str(CHROMIUM)
        # --no-sandbox: chromium refuses to run as root (CI does) with its sandbox on.
        for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--disable-background-networking", "--disable-component-update", "--disable-sync",
                         "--no-first-run", f"--user-data-dir={profile}", "--window-size=1400,1000",
                         f"--host-resolver-rules={OFFLINE}"):
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
        try:
            yield driver
        finally:
            driver.quit()


def open_page(browser: WebDriver, base_url: str) -> None:
    """The page at ``base_url``, once everything on it is drawn; the console read so far is dropped."""
    browser.get(base_url.rstrip("/") + "/")
    WebDriverWait(browser, WAIT_S).until(lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-loaded"))
    assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") == "true", \
        browser.find_element(By.ID, "status").text


def console_errors(browser: WebDriver) -> list[str]:
    """The console's errors since it was last read (a failed load, an exception)."""
    return [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def foreign_requests(browser: WebDriver, base_url: str) -> list[str]:
    """What the document in ``browser`` loaded from anywhere but ``base_url``."""
    loaded = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    return [url for url in loaded if not url.startswith(base_url.rstrip("/") + "/")]


def row_keys(browser: WebDriver, table: str, attribute: str) -> list[str]:
    return [row.get_attribute(attribute) for row in browser.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")]


def cell_texts(browser: WebDriver, selector: str) -> list[str]:
    return [cell.get_attribute("textContent") for cell in browser.find_elements(By.CSS_SELECTOR, selector)]


def click(browser: WebDriver, selector: str) -> None:
    """Click the element at ``selector`` as a person would, once scrolled to the middle of the window
    (the tables' sticky headers would take a click at its edge)."""
    element = browser.find_element(By.CSS_SELECTOR, selector)
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()
