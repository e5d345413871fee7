"""Every page of the console against a broker with some traffic: what each shows, and one
screenshot of each (into docs/console/ with CONSOLE_SCREENSHOTS=1, for the documentation)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing
from pathlib import Path

import pytest
from proton import Message
from proton.utils import BlockingConnection
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from proton_broker.config import BindingConfig, Config, ExchangeConfig
from tests.browser.conftest import (
    Console,
    click,
    console_config,
    go,
    log_in_anonymously,
    plotted,
    shown,
    until_text,
    wait,
)


@pytest.fixture
def console_broker_config() -> Config:
    """Queues of three types, a topic exchange and a binding, declared by configuration."""
    config = console_config()
    config.queues = {
        "orders": {"durable": True},
        "prices": {"qpid.last_value_queue_key": "ticker"},
        "urgent": {"x-qpid-priorities": 10},
    }
    config.exchanges = {"news": ExchangeConfig(type="topic")}
    config.bindings = [BindingConfig(exchange="news", queue="orders", key="orders.#")]
    return config


@pytest.fixture
def traffic(console: Console) -> Iterator[BlockingConnection]:
    """Messages on the queues and a consumer on orders, as a broker in use has."""
    with ExitStack() as stack:
        producer = stack.enter_context(closing(BlockingConnection(console.amqp, timeout=10)))
        consumer = stack.enter_context(closing(BlockingConnection(console.amqp, timeout=10)))
        orders = producer.create_sender("orders")
        for i in range(40):
            orders.send(
                Message(
                    body=f'{{"order": {i}}}',
                    content_type="application/json",
                    properties={"region": "north" if i % 2 else "south"},
                )
            )
        prices = producer.create_sender("prices")
        for ticker, price in (("ACME", 12.5), ("INIT", 7.25), ("ACME", 12.75)):
            prices.send(Message(body=price, properties={"ticker": ticker}))
        receiver = consumer.create_receiver("orders", credit=10)
        for _ in range(10):
            receiver.receive(timeout=5)
            receiver.accept()
        receiver.close()  # type: ignore[no-untyped-call]  # its detach carries the accepts first
        consumer.create_receiver("orders", name="idle", credit=0)  # a consumer that waits
        consumer.create_receiver("news", name="watcher", credit=0)  # a topic subscription
        yield producer


def test_every_page_shows_the_brokers_state(
    browser: WebDriver,
    console: Console,
    traffic: BlockingConnection,
    screenshot: Callable[[str], Path],
) -> None:
    log_in_anonymously(browser, console)
    until_text(browser, "#ov-messages", lambda t: t == "32", "30 orders and 2 prices queued")
    wait(browser).until(lambda d: len(plotted(d, "rates")[0]) >= 5)
    screenshot("overview")

    go(browser, "#/queues", 'tr[data-queue="urgent"]')
    until_text(browser, 'tr[data-queue="prices"] [data-test=depth]', lambda t: t == "2", "lvq")
    screenshot("queues")

    go(browser, "#/queues/orders", "#queue-attributes")
    click(browser, "#browse-count")
    browser.find_element(By.ID, "browse-count").clear()
    browser.find_element(By.ID, "browse-count").send_keys("4")
    click(browser, "#browse-button")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".message-card")) == 4)
    wait(browser).until(lambda d: len(plotted(d, "depth")[0]) >= 5)
    shown(browser, '#queue-consumers tr[data-link="idle"]')
    screenshot("queue")

    go(browser, "#/create", "#create-form")
    screenshot("create")

    go(browser, "#/exchanges", 'tr[data-exchange="news"]')
    until_text(browser, "#bindings-table", lambda t: "orders.#" in t, "the binding is listed")
    until_text(browser, "#subscriptions-table", lambda t: "_watcher" in t, "the subscription")
    screenshot("exchanges")

    go(browser, "#/connections", "#connections-table")
    wait(browser).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#connections-table tbody tr")) == 2
    )
    screenshot("connections")

    go(browser, "#/logs", "#logs-table tbody tr")
    screenshot("logs")


def test_the_logs_page_filters_by_code_prefix(browser: WebDriver, console: Console) -> None:
    with closing(BlockingConnection(console.amqp, timeout=10)):
        pass  # CON-1001, the connection opened; the console's login is logged under another
    log_in_anonymously(browser, console, "#/logs")

    def codes(d: WebDriver) -> list[str]:
        cells = d.find_elements(By.CSS_SELECTOR, "#logs-table tbody tr td:nth-child(3)")
        return [c.text for c in cells]

    wait(browser).until(lambda d: "CON-1001" in codes(d) and any(c[:4] != "CON-" for c in codes(d)))
    shown(browser, "#log-filter").send_keys("CON-")
    wait(browser).until(lambda d: "CON-1001" in codes(d) and all(c[:4] == "CON-" for c in codes(d)))
