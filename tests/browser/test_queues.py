"""The queues pages of the console, against a real broker and real AMQP clients: what a client
does shows on the page, and what the operator does on the page is what a client sees."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing

import pytest
from proton import Message, Timeout
from proton.reactor import DynamicNodeProperties
from proton.utils import BlockingConnection, BlockingSender
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import (
    Console,
    click,
    confirm,
    console_config,
    go,
    log_in_anonymously,
    plotted,
    shown,
    until_text,
    wait,
)


@pytest.fixture
def amqp(console: Console) -> Iterator[BlockingConnection]:
    """One AMQP client connection to the console's broker."""
    connection = BlockingConnection(console.amqp, timeout=10)
    yield connection
    connection.close()


def send(sender: BlockingSender, count: int, **fields: object) -> None:
    for i in range(count):
        sender.send(Message(body=f"message {i}", **fields))


def open_queue(browser: WebDriver, console: Console, name: str) -> None:
    log_in_anonymously(browser, console, f"#/queues/{name}")
    until_text(browser, "#queue-name", lambda t: t == name, "the queue's page is open")
    shown(browser, "#queue-attributes")


def depth_shows(browser: WebDriver, depth: int) -> None:
    until_text(browser, "#q-depth", lambda t: t == str(depth), f"the queue's depth is {depth}")


def test_a_queue_an_amqp_client_creates_appears_in_the_queues_table(
    browser: WebDriver, console: Console, amqp: BlockingConnection
) -> None:
    log_in_anonymously(browser, console, "#/queues")
    shown(browser, "#queues-table")
    assert not browser.find_elements(By.CSS_SELECTOR, 'tr[data-queue="orders"]')
    send(amqp.create_sender("orders"), 2)
    row = 'tr[data-queue="orders"]'
    until_text(browser, f"{row} [data-test=depth]", lambda t: t == "2", "orders holds 2")
    click(browser, f"{row} a[data-test=queue-link]")
    until_text(browser, "#queue-name", lambda t: t == "orders", "the link opens the queue")


def test_the_queues_table_filters_by_name_and_sorts_by_a_clicked_column(
    browser: WebDriver, console: Console, amqp: BlockingConnection
) -> None:
    for name, count in (("orders", 3), ("order-returns", 1), ("prices", 2)):
        send(amqp.create_sender(name), count)
    log_in_anonymously(browser, console, "#/queues")

    def names(d: WebDriver) -> list[str]:
        rows = d.find_elements(By.CSS_SELECTOR, "#queues-table tbody tr")
        return [r.get_attribute("data-queue") or "" for r in rows]

    wait(browser).until(lambda d: names(d) == ["order-returns", "orders", "prices"])
    click(browser, '#queues-table th[data-sort="depth"]')  # ascending
    wait(browser).until(lambda d: names(d) == ["order-returns", "prices", "orders"])
    click(browser, '#queues-table th[data-sort="depth"]')  # and descending
    wait(browser).until(lambda d: names(d) == ["orders", "prices", "order-returns"])
    shown(browser, "#queue-filter").send_keys("order")
    wait(browser).until(lambda d: names(d) == ["orders", "order-returns"])


def test_the_depth_plot_rises_while_a_producer_sends(
    browser: WebDriver, console: Console, amqp: BlockingConnection
) -> None:
    sender = amqp.create_sender("ticks")
    open_queue(browser, console, "ticks")

    def last_depth(d: WebDriver) -> float | None:
        data = plotted(d, "depth")
        return data[1][-1] if len(data) > 1 and data[1] else None

    def plotted_depth_is(depth: int) -> None:
        wait(browser).until(lambda d: last_depth(d) == depth)

    plotted_depth_is(0)
    total = 0
    for batch in (5, 10, 15):  # the plot's last point follows each batch
        send(sender, batch)
        total += batch
        plotted_depth_is(total)
    assert len(plotted(browser, "depth")[0]) >= 3  # one point per sample, over time
    depth_shows(browser, 30)


def test_browsing_shows_a_messages_body_and_application_properties_and_removes_nothing(
    browser: WebDriver, console: Console, amqp: BlockingConnection
) -> None:
    amqp.create_sender("orders").send(
        Message(body="hello console", properties={"colour": "red"}, content_type="text/plain")
    )
    open_queue(browser, console, "orders")
    click(browser, "#browse-button")
    card = shown(browser, ".message-card")
    assert card.find_element(By.CSS_SELECTOR, "[data-test=message-body]").text == "hello console"
    properties = card.find_element(By.CSS_SELECTOR, "[data-test=application-properties]").text
    assert "colour" in properties and "red" in properties
    assert "text/plain" in card.text
    receiver = amqp.create_receiver("orders")
    assert receiver.receive(timeout=5).body == "hello console"  # still there to consume
    receiver.accept()


@pytest.mark.parametrize(
    "console_broker_config", [console_config(confidential_without_tls="never")], ids=["never"]
)
def test_where_bodies_are_confidential_a_message_card_says_why_instead_of_the_body(
    browser: WebDriver, console: Console, amqp: BlockingConnection
) -> None:
    amqp.create_sender("orders").send(
        Message(body="hello console", properties={"colour": "red"}, content_type="text/plain")
    )
    open_queue(browser, console, "orders")
    click(browser, "#browse-button")
    card = shown(browser, ".message-card")
    withheld = card.find_element(By.CSS_SELECTOR, "[data-test=message-withheld]").text
    assert "broker.confidential_without_tls" in withheld
    assert "hello console" not in card.text and "colour" not in card.text
    assert "text/plain" in card.text


def test_a_test_message_sent_from_the_page_reaches_an_amqp_receiver(
    browser: WebDriver, console: Console, amqp: BlockingConnection
) -> None:
    amqp.create_sender("inbox")
    open_queue(browser, console, "inbox")
    click(browser, "#send-section summary")
    shown(browser, "#send-body").send_keys("from the page")
    shown(browser, "#send-properties").send_keys("colour=blue\nsize=large")
    click(browser, "#send-button")
    until_text(browser, "#send-result", lambda t: t.startswith("sent"), "the page says it sent")
    receiver = amqp.create_receiver("inbox")
    message = receiver.receive(timeout=5)
    receiver.accept()
    body = message.body.decode() if isinstance(message.body, bytes) else message.body
    assert body == "from the page"
    assert message.properties == {"colour": "blue", "size": "large"}


def test_purge_empties_the_queue_for_amqp_receivers_too(
    browser: WebDriver, console: Console, amqp: BlockingConnection
) -> None:
    send(amqp.create_sender("work"), 3)
    open_queue(browser, console, "work")
    depth_shows(browser, 3)
    click(browser, "#purge-button")
    confirm(browser)
    until_text(browser, "#action-result", lambda t: t == "purged 3 messages", "3 were purged")
    depth_shows(browser, 0)
    with closing(amqp.create_receiver("work")) as receiver, pytest.raises(Timeout):
        receiver.receive(timeout=0.5)


def test_a_queue_holding_messages_is_deleted_only_when_forced(
    browser: WebDriver, console: Console
) -> None:
    with closing(BlockingConnection(console.amqp, timeout=10)) as connection:
        send(connection.create_sender("old"), 1)
    open_queue(browser, console, "old")
    click(browser, "#delete-button")
    confirm(browser)  # without force: the server refuses, the page says why
    until_text(browser, "#queue-error", bool, "the refusal to delete a non-empty queue shows")
    assert "old" in console.queue_names()
    click(browser, "#delete-button")
    confirm(browser, force=True)
    shown(browser, "#queues-table")  # back on the list
    wait(browser).until(lambda d: not d.find_elements(By.CSS_SELECTOR, 'tr[data-queue="old"]'))
    assert "old" not in console.queue_names()


def test_a_queue_with_an_invalid_option_is_refused_with_the_servers_reason(
    browser: WebDriver, console: Console
) -> None:
    log_in_anonymously(browser, console, "#/create")
    shown(browser, "#create-name").send_keys("bad")
    shown(browser, "#opt-priorities").send_keys("lots")
    click(browser, "#create-button")
    shown_text = until_text(browser, "#form-error", bool, "the server's reason shows")
    # The same request, made by the page's own session: the form shows the server's text as is.
    served = browser.execute_async_script(
        """const done = arguments[arguments.length - 1];
        fetch("api/queues", {method: "POST", headers: {"Content-Type": "application/json",
          "X-CSRF-Token": window.consoleState.csrf},
          body: JSON.stringify({name: "bad", options: {priorities: "lots"}})})
          .then(r => r.json().then(j => done([r.status, j.error])));"""
    )
    assert served == [400, shown_text]
    assert "bad" not in console.queue_names()


def test_a_queue_created_from_the_form_has_the_options_given(
    browser: WebDriver, console: Console
) -> None:
    log_in_anonymously(browser, console, "#/create")
    shown(browser, "#create-name").send_keys("urgent")
    shown(browser, "#opt-priorities").send_keys("5")
    click(browser, "#create-button")
    until_text(browser, "#queue-name", lambda t: t == "urgent", "the new queue's page opens")
    until_text(browser, "#q-type", lambda t: t == "priority", "it is a priority queue")
    assert "urgent" in console.queue_names()


def test_the_overview_counts_the_queues_and_plots_the_rates(
    browser: WebDriver, console: Console, amqp: BlockingConnection
) -> None:
    send(amqp.create_sender("orders"), 4)
    log_in_anonymously(browser, console)
    until_text(browser, "#ov-messages", lambda t: t == "4", "4 messages are queued")
    until_text(browser, "#ov-connections", lambda t: t == "1", "one AMQP connection")
    wait(browser).until(lambda d: len(plotted(d, "rates")[0]) >= 2)
    go(browser, "#/queues", 'tr[data-queue="orders"]')


def test_a_setting_edited_on_the_page_changes_the_live_queue_and_a_bad_one_shows_why(
    browser: WebDriver, console: Console, amqp: BlockingConnection
) -> None:
    amqp.create_sender("retries")
    open_queue(browser, console, "retries")
    field = shown(browser, "#edit-maximumDeliveryAttempts")
    field.clear()
    field.send_keys("3")
    click(browser, "#edit-button")
    until_text(
        browser,
        'tr[data-attr="maximumDeliveryAttempts"] td',
        lambda t: t == "3",
        "the queue takes the new setting",
    )
    field = shown(browser, "#edit-maximumDeliveryAttempts")  # the form is drawn anew
    field.clear()
    field.send_keys("many")
    click(browser, "#edit-button")
    refusal = until_text(browser, "#edit-error", bool, "the server's refusal shows")
    assert "'maximumDeliveryAttempts'" in refusal and "'many'" in refusal, refusal


def test_a_queue_name_that_looks_like_html_is_shown_as_text(
    browser: WebDriver, console: Console, amqp: BlockingConnection
) -> None:
    name = '<img src=x onerror="window.hacked=1">'
    amqp.create_sender(name)
    log_in_anonymously(browser, console, "#/queues")
    link = shown(browser, "#queues-table a[data-test=queue-link]")
    assert link.text == name
    link.click()
    until_text(browser, "#queue-name", lambda t: t == name, "its page names it as it is")
    assert not browser.find_elements(By.CSS_SELECTOR, "#view img")
    assert browser.execute_script("return window.hacked") is None


def test_a_grouped_queue_shows_its_groups_and_sequence_numbers(
    browser: WebDriver, console: Console, amqp: BlockingConnection
) -> None:
    sender = amqp.create_sender(
        "by-customer", options=DynamicNodeProperties({"qpid.group_header_key": "customer"})
    )
    for i in range(5):
        sender.send(Message(body=f"order {i}", properties={"customer": "ann" if i < 3 else "bob"}))
    open_queue(browser, console, "by-customer")
    until_text(browser, '#queue-group-list tr[data-group="ann"]', lambda t: "3" in t, "ann: 3")
    until_text(browser, '#queue-group-list tr[data-group="bob"]', lambda t: "2" in t, "bob: 2")
    until_text(
        browser,
        '#queue-sequence tr[data-attr="nextSequenceNumber"] td',
        lambda t: t == "6",
        "five messages were numbered",
    )
