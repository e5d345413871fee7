"""The server's event handlers are named for events that exist: Proton calls ``on_<event>``
by name, so a misspelt (or mechanically renamed) handler is never called and nothing says so."""

from __future__ import annotations

from proton._events import EventType

from proton_broker.amqp.server import Server

# Events the broker makes itself: its injector's application event, and the fast lane's
# raw credit handler (amqp/loop.py calls it directly).
OWN_EVENTS = {"on_broker_call", "on_raw_link_flow"}


def test_every_handler_of_the_server_answers_an_event_proton_sends() -> None:
    proton_events = {event.method for event in EventType.TYPES.values()}
    handlers = {name for name in vars(Server) if name.startswith("on_")}
    assert handlers, "no handlers found"
    assert handlers - proton_events - OWN_EVENTS == set()
    assert {"on_connection_bound", "on_link_remote_open"} <= handlers
