"""Logging in to the console: a user with a password, and anonymous where the broker's SASL
policy lets this client in without one. The broker with a user runs as a process, because
Cyrus SASL reads its configuration once per process (as in tests/http/test_auth.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from proton_broker.testing import BrokerProcess, add_user
from tests.browser.conftest import Console, click, log_in_anonymously, shown, until_text

PASSWORD = "s3cret"


@pytest.fixture
def users_only(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker with the user alice that lets nobody in without a password."""
    add_user(tmp_path, "alice", PASSWORD)
    env = {"PROTON_BROKER_SASL_ANONYMOUS": "never", "PROTON_BROKER_CONSOLE_SAMPLE_INTERVAL": "0.2"}
    process = BrokerProcess(
        "--store", "memory", "--http-port", "0", data_dir=str(tmp_path), env=env
    ).start()
    yield process
    process.stop()


def test_a_user_logs_in_with_a_password_after_a_wrong_one_is_refused(
    browser: WebDriver, users_only: BrokerProcess
) -> None:
    assert users_only.http_base, "the broker did not say where its HTTP gateway is"
    browser.get(users_only.http_base + "/console/#/queues")
    shown(browser, "#login-form")
    assert not browser.find_element(By.ID, "nav").is_displayed()  # nothing to see yet
    assert not browser.find_elements(By.ID, "login-anonymous")  # nobody in without a user
    shown(browser, "#login-user").send_keys("alice")
    shown(browser, "#login-password").send_keys("wrong")
    click(browser, "#login-button")
    until_text(browser, "#login-error", bool, "a wrong password shows the server's refusal")
    assert not shown(browser, "#login-form").get_attribute("hidden")
    password = shown(browser, "#login-password")
    password.clear()
    password.send_keys(PASSWORD)
    click(browser, "#login-button")
    until_text(browser, "#whoami", lambda t: t == "alice", "the console names who is logged in")
    shown(browser, "#queues-table")  # and goes where the user was going
    click(browser, "#logout-button")
    shown(browser, "#login-form")
    assert not browser.find_element(By.ID, "nav").is_displayed()


def test_where_anonymous_is_allowed_the_console_offers_to_continue_without_a_password(
    browser: WebDriver, console: Console
) -> None:
    log_in_anonymously(browser, console)
    until_text(browser, "#whoami", lambda t: t == "anonymous", "the user is anonymous")
    until_text(browser, "#ov-version", bool, "the overview shows the broker's version")
