"""Fixtures for the web console in a real browser: Debian's Chromium driven by Selenium, and a
real broker (in this process, with its HTTP gateway) whose console it opens.

Nothing here is skipped: without Chromium the tests fail and say how to install it
(scripts/setup-browser.sh), because a console nobody ran in a browser is not tested.
Every wait is explicit (WebDriverWait on what the page shows), never a fixed sleep."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from proton_broker.config import Config
from tests.conftest import RunningBroker
from tests.http.conftest import http_config

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WAIT = 15.0  # seconds any one thing may take to show (the page polls every 2 s)
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"

CHROME_ARGUMENTS = (
    "--headless=new",
    # Chromium's sandbox refuses root and needs user namespaces, which containers lack.
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",  # /dev/shm is small in containers
    "--disable-quic",
    "--no-first-run",
    # Nothing phones home: no updates, sync or background fetches during a test.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    """A headless Chromium with a profile of its own, quit after the test."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(
            f"{' and '.join(missing)} missing: run scripts/setup-browser.sh (as root) to "
            "install Debian's chromium and chromium-driver",
            pytrace=False,
        )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in CHROME_ARGUMENTS:
        options.add_argument(argument)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
        # The page's console (script errors, refused requests), shown when the test failed.
        for entry in driver.get_log("browser"):  # type: ignore[no-untyped-call]
            print(f"browser {entry['level']}: {entry['message']}")
    finally:
        driver.quit()


class Console:
    """A running broker and its console's address."""

    def __init__(self, running: RunningBroker) -> None:
        self.running = running
        host, port = running.app.http.address
        self.url = f"http://{host}:{port}/console/"

    @property
    def amqp(self) -> str:
        return self.running.url

    def queue_names(self) -> set[str]:
        """The broker's queues, read on its loop (the truth the page is checked against)."""
        names = self.running.call(  # type: ignore[no-untyped-call]
            lambda: list(self.running.broker.queues)
        )
        return set(names)


def console_config(**broker: Any) -> Config:
    """A broker with the HTTP gateway on a free port and a memory store, sampling the
    console's counters every 0.2 s so the plots move within a test."""
    config = http_config(**broker)
    config.console.sample_interval = 0.2
    return config


@pytest.fixture
def console_broker_config() -> Config:
    """Override in a test module to change the broker the console belongs to."""
    return console_config()


@pytest.fixture
def console(
    console_broker_config: Config, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> Iterator[Console]:
    # The broker's own start (__main__) logs at INFO; in process, say so for the logs page.
    caplog.set_level(logging.INFO, logger="proton_broker")
    console_broker_config.broker.data_dir = str(tmp_path / "data")
    running = RunningBroker(console_broker_config)
    yield Console(running)
    alive = running.alive()
    running.stop()
    if not alive:
        pytest.fail("the broker's event loop died during the test")


# Helpers the tests read like steps of a user's session.


def wait(driver: WebDriver, timeout: float = WAIT) -> WebDriverWait[WebDriver]:
    # A page redrawn every 2 s replaces its elements; a stale one just means "look again".
    return WebDriverWait(driver, timeout, ignored_exceptions=[StaleElementReferenceException])


def shown(driver: WebDriver, css: str, timeout: float = WAIT) -> WebElement:
    """The element once it is displayed."""
    return wait(driver, timeout).until(ec.visibility_of_element_located((By.CSS_SELECTOR, css)))


def click(driver: WebDriver, css: str) -> None:
    wait(driver).until(ec.element_to_be_clickable((By.CSS_SELECTOR, css))).click()


def text_of(driver: WebDriver, css: str) -> str:
    """The element's text now, or "" when it is not on the page (between two redraws)."""
    found = driver.find_elements(By.CSS_SELECTOR, css)
    try:
        return found[0].text if found else ""
    except StaleElementReferenceException:
        return ""


def until_text(driver: WebDriver, css: str, test: Callable[[str], bool], what: str) -> str:
    """Wait until the text of ``css`` passes ``test``; the failure message says ``what``."""
    seen: list[str] = []

    def check(d: WebDriver) -> str | bool:
        text = text_of(d, css)
        seen.append(text)
        return text if test(text) else False

    try:
        return str(wait(driver).until(check))
    except Exception as timeout:
        status = text_of(driver, "#status")  # what the page says went wrong, if anything
        raise AssertionError(
            f"{what}; {css} last showed {seen[-1:]!r}; the page's status: {status!r}"
        ) from timeout


def log_in_anonymously(driver: WebDriver, console: Console, page: str = "#/overview") -> None:
    """Open ``page`` and continue as anonymous (the broker lets loopback clients in)."""
    driver.get(console.url + page)
    click(driver, "#login-anonymous")
    shown(driver, "#nav")
    shown(driver, "#whoami")


def go(driver: WebDriver, page: str, ready: str) -> WebElement:
    """Follow the console's own link to ``page`` (a hash route) and wait for ``ready``."""
    driver.execute_script("location.hash = arguments[0]", page)
    return shown(driver, ready)


def confirm(driver: WebDriver, force: bool = False) -> None:
    """Answer the confirmation dialog with "confirm" (ticking "force" if asked)."""
    shown(driver, "#confirm-dialog")
    if force:
        click(driver, "#confirm-force")
    click(driver, "#confirm-ok")
    wait(driver).until(ec.invisibility_of_element_located((By.CSS_SELECTOR, "#confirm-dialog")))


def plotted(driver: WebDriver, plot: str) -> list[list[float | None]]:
    """The data a plot of the page draws now (uPlot's own arrays: t, then each series)."""
    data = driver.execute_script(
        "const p = window.consoleState && window.consoleState.plots[arguments[0]];"
        "return p ? p.data : null;",
        plot,
    )
    return data or []


@pytest.fixture
def screenshot(browser: WebDriver, tmp_path: Path) -> Callable[[str], Path]:
    """Save what the browser shows as NAME.png: into docs/console/ when CONSOLE_SCREENSHOTS=1
    (to refresh the documentation's pictures, one per page), else into the test's tmp_path."""

    def save(name: str) -> Path:
        folder = SCREENSHOTS if os.environ.get("CONSOLE_SCREENSHOTS") == "1" else tmp_path
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.png"
        assert browser.save_screenshot(str(path)), f"no screenshot of {name}"
        return path

    return save
