"""The page's jobs, on real jobs: a live server on an SQLite file runs tiny tunes itself (as
``autotune serve`` does there), and the page, in Debian's chromium (:mod:`browser_support`), shows
what the API answers for each: a succeeded job with its profile link, a failed one with its error,
a cancelled one, one running with its ETA moving, and one queued behind it. The study view follows
the running job: its progress, and its plots drawn again as trials end.

Slow: the jobs run for real (a few seconds a trial on the embedded engine).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from autotune.jobs.roots import ModelRoots
from browser_support import chromium, click, console_errors, open_page
from jobs_support import AUTH, TOKEN, tiny_request, wait_for_job, write_workload
from service_support import live_server

pytestmark = pytest.mark.slow
# A study that stays running through the tests: 16 short trials (none and n-gram at depths 1-7,
# concurrency levels 1 and 2), each generating 200 tokens; cancelled at the end, it stops at its next trial's end.
LONG_PROMPTS = ("def parse(line):", "import numpy as np\n", "class Cache:", "for i in range(10):", "# sort it\n")
LONG_MAX_TOKENS = 40
POLL_S = 10  # how long the page may take to show what the API answers (it asks every 2 s)
TRIAL_S = 180  # how long a trial may take on a busy machine


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[tuple[str, dict[str, int]]]:
    """A live, writable server with a job in each state: its base URL and the job ids by status."""
    folder = tmp_path_factory.mktemp("page-jobs")
    url = f"sqlite:///{folder / 'autotune.db'}"
    (folder / "autotune.db").write_bytes(sqlite_template.read_bytes())
    roots = folder / "models"
    roots.mkdir()
    tiny = write_workload(roots)
    gone = roots / "gone.jsonl"
    gone.write_bytes(tiny.read_bytes())
    long = roots / "long.jsonl"
    long.write_text("".join(json.dumps({"prompt": p, "max_tokens": LONG_MAX_TOKENS}) + "\n" for p in LONG_PROMPTS))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AUTOTUNE_API_TOKEN", TOKEN)
        with live_server(url, model_roots=ModelRoots.of([str(roots)])) as client:
            def submit(workload: Path, **changes: object) -> int:
                answer = client.post("/v1/tune", json=tiny_request(workload, **changes), headers=AUTH)
                assert answer.status_code == 202, answer.text
                return answer.json()["id"]

            ids = {"succeeded": submit(tiny, study="tuned", max_depth=1), "failed": submit(gone, study="broken")}
            gone.unlink()  # the server runs one job at a time: when it gets to this one, its workload is gone
            assert wait_for_job(client, ids["failed"])["status"] == "failed"
            ids["running"] = submit(long, study="long", max_depth=7, concurrencies=[1, 2])
            wait_for_job(client, ids["running"], lambda job: job["progress"].get("trial_started_at"))
            ids["cancelled"] = submit(tiny, study="not-wanted")
            client.post(f"/v1/jobs/{ids['cancelled']}/cancel", headers=AUTH)
            ids["queued"] = submit(tiny, study="next")
            try:
                yield str(client.base_url), ids
            finally:  # the running job stops at its next trial boundary, before the server goes
                for name in ("queued", "running"):
                    client.post(f"/v1/jobs/{ids[name]}/cancel", headers=AUTH)
                wait_for_job(client, ids["running"], timeout_s=TRIAL_S)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


def api_job(base_url: str, job_id: int) -> dict:
    return httpx.get(f"{base_url.rstrip('/')}/v1/jobs/{job_id}").json()


def cell(browser: WebDriver, job_id: int, column: str) -> str:
    """The text a person reads in job ``job_id``'s row under the header ``column``."""
    headers = [header.text for header in browser.find_elements(By.CSS_SELECTOR, "#jobs thead th")]
    return browser.find_elements(By.CSS_SELECTOR, f'#jobs tr[data-job-id="{job_id}"] td')[headers.index(column)].text


def test_each_job_shows_the_status_progress_and_profile_the_api_answers(
        jobs: tuple[str, dict[str, int]], browser: WebDriver) -> None:
    base_url, ids = jobs
    open_page(browser, base_url)
    for status, job_id in ids.items():
        assert cell(browser, job_id, "State") == api_job(base_url, job_id)["status"] == status

    done = api_job(base_url, ids["succeeded"])
    progress = done["progress"]
    assert cell(browser, ids["succeeded"], "Progress") == \
        f"{progress['phase']} {progress['trials_done']}/{progress['trials_total']} trials"
    link = f'#jobs tr[data-job-id="{ids["succeeded"]}"] a.profile-link'
    assert browser.find_element(By.CSS_SELECTOR, link).text == f"profile {done['profile_id']}"
    click(browser, link)
    assert browser.execute_script("return location.hash") == f"#profile-{done['profile_id']}"
    assert browser.find_element(By.CSS_SELECTOR, "#profiles tr:target").get_attribute("data-profile-id") == \
        str(done["profile_id"])

    failed = browser.find_element(By.CSS_SELECTOR, f'#jobs tr[data-job-id="{ids["failed"]}"] pre.error').text
    assert failed == api_job(base_url, ids["failed"])["error"] and "gone.jsonl" in failed
    assert cell(browser, ids["queued"], "ETA") == cell(browser, ids["succeeded"], "ETA") == "–"
    assert console_errors(browser) == []


def test_a_running_job_s_eta_moves(jobs: tuple[str, dict[str, int]], browser: WebDriver) -> None:
    base_url, ids = jobs
    open_page(browser, base_url)
    first = cell(browser, ids["running"], "ETA")
    assert first != "–" and first.replace("≥ ", "").count(":") == 1, first
    moved = WebDriverWait(browser, POLL_S).until(lambda b: (now := cell(b, ids["running"], "ETA")) != first and now)
    assert moved != "–", moved


def test_the_study_view_follows_the_running_job(jobs: tuple[str, dict[str, int]], browser: WebDriver) -> None:
    base_url, ids = jobs
    open_page(browser, base_url)
    click(browser, f'#jobs tr[data-job-id="{ids["running"]}"] button')
    assert browser.find_element(By.ID, "study-title").text == "Study long"
    panel = WebDriverWait(browser, POLL_S).until(lambda b: b.find_element(By.ID, "study-job").is_displayed() and
                                                 b.find_element(By.ID, "study-job"))
    assert panel.find_element(By.CSS_SELECTOR, ".status").text == "running"
    assert panel.find_element(By.CSS_SELECTOR, ".eta").text != "–"
    assert "taken by" in browser.find_element(By.ID, "study-job-log").text

    def plots(b: WebDriver) -> list[str] | None:
        images = b.execute_script("return [...document.querySelectorAll('#plots img')]"
                                  ".map(i => i.complete && i.naturalWidth > 0 ? i.src : null)")
        return images if images and all(images) else None

    wait_for_trials(base_url, ids["running"], 1)
    drawn = WebDriverWait(browser, POLL_S).until(plots)
    wait_for_trials(base_url, ids["running"], api_job(base_url, ids["running"])["progress"]["trials_done"] + 1)
    WebDriverWait(browser, POLL_S).until(lambda b: (again := plots(b)) and again != drawn)  # drawn anew
    assert console_errors(browser) == []


def wait_for_trials(base_url: str, job_id: int, done: int) -> None:
    """Until job ``job_id`` has finished ``done`` trials (and is still running)."""
    deadline = time.monotonic() + TRIAL_S
    while (job := api_job(base_url, job_id))["progress"]["trials_done"] < done:
        assert job["status"] == "running" and time.monotonic() < deadline, job
        time.sleep(0.5)
