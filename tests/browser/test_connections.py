"""The connections page: every AMQP connection is a row, and closing one from the page
closes the client's connection (amqp:connection:forced)."""

from __future__ import annotations

from contextlib import closing

import pytest
from proton import Message
from proton.utils import BlockingConnection, ConnectionClosed
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.conftest import Console, click, confirm, log_in_anonymously, shown, wait


def container_of(connection: BlockingConnection) -> str:
    """The container id the client opened its connection with (the page's container column)."""
    assert connection.conn is not None
    return str(connection.conn.container)


def test_closing_a_connection_from_the_page_closes_the_amqp_clients_connection(
    browser: WebDriver, console: Console
) -> None:
    with (
        closing(BlockingConnection(console.amqp, timeout=10)) as kept,
        closing(BlockingConnection(console.amqp, timeout=10)) as doomed,
    ):
        receiver = doomed.create_receiver("work")
        kept.create_sender("work")
        log_in_anonymously(browser, console, "#/connections")
        row = f'tr[data-container="{container_of(doomed)}"]'
        shown(browser, f'tr[data-container="{container_of(kept)}"]')
        until_links = shown(browser, f"{row} td.num")  # the links column
        assert until_links.text == "1"
        click(browser, f"{row} button.close-connection")
        confirm(browser)
        wait(browser).until(lambda d: not d.find_elements(By.CSS_SELECTOR, row))
        with pytest.raises(ConnectionClosed) as closed:
            receiver.receive(timeout=10)
        assert closed.value.condition == "amqp:connection:forced"
        shown(browser, f'tr[data-container="{container_of(kept)}"]')  # the other stays
        kept.create_sender("still-open")


def test_a_connection_shows_the_bytes_its_socket_carried(
    browser: WebDriver, console: Console
) -> None:
    with closing(BlockingConnection(console.amqp, timeout=10)) as bulky:
        bulky.create_sender("bulk").send(Message(body=b"x" * 3 * 1024 * 1024))
        log_in_anonymously(browser, console, "#/connections")
        row = f'tr[data-container="{container_of(bulky)}"]'
        shown(browser, row)
        bytes_in = shown(browser, f'{row} td[data-test="bytes-in"]')
        assert bytes_in.text == "3.0 MiB"  # the message and a few hundred bytes of frames
        assert shown(browser, f'{row} td[data-test="bytes-out"]').text.endswith(" B")
